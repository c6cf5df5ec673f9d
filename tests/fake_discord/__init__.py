"""The fake Discord's own tests; the server itself is testkit.fake_discord."""
