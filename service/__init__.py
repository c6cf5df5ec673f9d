"""The game service: every player, moderator and admin action, written once for both faces (the
Discord bot's cogs and the play page's routes).

Each action takes plain ids and values (a `Place`: the server and channel; a `Member`: who acts)
and returns what happened, or raises a refusal (game.errors.GameError, with its code) that each
face renders in its reader's language. What a face says about it (an announcement, a toast) and
how it asks (a slash command, a button) stays in the face; the rules, the transaction and what is
stored are here. Layering: above db/ and the turn queue (inference.queue), below bot/ and play/.
"""
