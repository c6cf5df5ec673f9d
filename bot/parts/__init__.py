"""The bot's parts: what the client (bot.client) makes and carries (the notifier, the status
board, the edit scheduler, the scheduled jobs, the metrics, the caches...) and what both it and
the answers (bot.answers) use (embeds, locale, acks...). Each part is given what it uses; none
imports the client or the answers (pyproject.toml's import contracts)."""
