"""What the tests, the benches and scripts/train_tiny.py share: tiny random models of the real
architectures written in the released formats (`tiny`), the fake Discord server the real
discord.py client talks to (`fake_discord`), throw-away databases on a real Postgres (`pg`),
synthetic films made by ffmpeg (`lavfi`), training and evaluation sets in the pipeline's formats
(`film_set`, `evaluation_set`), the queue's test helpers (`queue`) and waits on an expected event
(`waits`).

Never imported by the application (an import-linter contract holds it) and not in the wheel."""
