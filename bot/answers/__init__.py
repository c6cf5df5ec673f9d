"""What answers interactions: the slash commands (one cog per concern, bot.answers.cogs), the
persistent buttons' clicks (views), the tree's error handler (wiring, replies) and what they
share. Loaded by name as the client's extensions (bot.client.EXTENSIONS); each reads the client as
`discord.Interaction[AnimeGamerBot].client`, so the client imports none of it."""
