"""The Discord client: a commands.AutoShardedBot (its shards from settings; bot/parts/shards.py) that
makes the bot's parts (bot.parts) and whose setup_hook loads by name bot.answers.wiring (the tree's
error handler, the persistent buttons) and one cog per concern, then starts the notifier and the
scheduled jobs.

Each part is given what it uses: the settings, the database, the game service (made at each use,
bot.parts.service_args.service_on), the metrics, the edit scheduler, the servers' languages
(bot.parts.locale.Languages), and this client typed by a Protocol of the few discord.py calls the
part makes (get_channel, guilds, wait_until_ready...), never the client as such. So no part
imports this module, and the parts do not reach each other through it.

What the client carries is what the answers (bot.answers) read of it as
`discord.Interaction[AnimeGamerBot].client`, and what it runs itself:
- settings, db, queue: the game service of each interaction (bot.parts.service_args.deps_of);
- config: the configuration cache (/admin; the server's language, bot.parts.locale.Speaker);
- board, edits: the status messages (the buttons' clicks) and every edit of a message (/mod remove, votes);
- automod: the servers' AutoMod keyword rules, applied to what members type;
- maintenance: the scheduled jobs (/privacy delete wakes its job; the vote cog adds its tick);
- vote_rounds: where the vote cog registers while it is loaded;
- interaction_meter: each interaction's receipt, acknowledgement and outcome (the tree's check, replies);
- metrics, notifier, queue_watch, shards_claim, upload_limits, health_port: its own (started and
  closed with it, /metrics and /healthz, the one command sync, the upload limits seen in dispatch)."""

from __future__ import annotations

import gc
import logging
from datetime import timedelta

import discord
from discord import app_commands
from discord.ext import commands

from bot.parts import acks, health, locale
from bot.parts.automod import AutoModRules
from bot.parts.config_cache import ConfigCache
from bot.parts.edits import EditScheduler
from bot.parts.interaction_meter import InteractionMeter
from bot.parts.maintenance import Maintenance
from bot.parts.metrics import BotMetrics
from bot.parts.notifier import RETRY_DELAYS, Notifier
from bot.parts.permissions import bot_intents
from bot.parts.privacy import PrivacyJobs
from bot.parts.queue_watch import QueueWatch
from bot.parts.service_args import service_on
from bot.parts.shards import ShardClaim
from bot.parts.status import StatusBoard
from bot.parts.translator import CatalogTranslator
from bot.parts.vote_rounds import VoteRounds
from service.jobs import Jobs, QueueJobs
from service.runtime import Store
from settings import Settings

log = logging.getLogger(__name__)

EXTENSIONS = ("bot.answers.wiring", "bot.answers.cogs.play", "bot.answers.cogs.admin", "bot.answers.cogs.moderation",
              "bot.answers.cogs.games", "bot.answers.cogs.vote", "bot.answers.cogs.help", "bot.answers.cogs.privacy",
              "bot.answers.cogs.shots", "bot.answers.cogs.modlog")


FULL_COLLECTION_EVERY = 100  # young collections between two full ones (Python's default: 10)
_frozen = False


def freeze_startup_objects(*, again: bool = False) -> None:
    """Collect, then move every object alive (modules, catalogs, the guilds' caches) out of the
    cyclic garbage collector's generations (gc.freeze), so that a full collection walks only what
    the bot made since, and make full collections rarer: under a burst of interactions one
    otherwise paused the event loop for 100-200 ms (bench/channels.py). Once per process (the
    first READY), and `again` after a shard identified anew: its guilds' old caches, frozen, are
    garbage now and collected here."""
    global _frozen
    if _frozen and not again:
        return
    _frozen = True
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, max(full, FULL_COLLECTION_EVERY))


class GameTree(app_commands.CommandTree["AnimeGamerBot"]):
    async def interaction_check(self, interaction: discord.Interaction[AnimeGamerBot]) -> bool:
        bot = interaction.client
        locale.adopt(interaction, pseudo=bot.settings.pseudo_locale)  # answers, autocomplete and errors in the member's language
        meter = bot.interaction_meter
        meter.handled_in_current_task(interaction)
        await acks.acknowledge_command(interaction, meter.gate)  # before the look-up, the checks and the handler
        return True


class AnimeGamerBot(commands.AutoShardedBot):
    def __init__(
        self,
        settings: Settings,
        db: Store,
        *,
        queue: Jobs | None = None,
        edit_budget: tuple[int, float] = (5, 5.0),
        sweep_seconds: float = 30.0,
        post_lease: timedelta | None = None,
        post_retry_delays: tuple[float, ...] = RETRY_DELAYS,
        claimant: str | None = None,
        sync_commands: bool = False,
        health_address: tuple[str, int] | None = None,
        **options,
    ) -> None:
        """db: the database, as service.runtime opened it. post_lease: how long a claim on a turn
        to post holds (None: the service's usual lease). health_address: (host, port) to serve
        GET /healthz on (bot.parts.health); port 0 picks a free one, then in `health_port`. None: no
        health endpoint. Shards: settings.shard_ids of settings.shard_count (unset: Discord's
        recommended count, all in this process); the shard_ids/shard_count options override them."""
        # Metrics before the client: its HTTP session is made with the interaction meter's trace.
        metrics = BotMetrics()
        meter = InteractionMeter(metrics)
        options["http_trace"] = meter.trace(options.get("http_trace"))

        options.setdefault("shard_ids", settings.shard_ids)
        options.setdefault("shard_count", settings.shard_count)
        super().__init__(
            command_prefix=commands.when_mentioned,  # unused: slash commands only
            intents=bot_intents(),
            allowed_mentions=discord.AllowedMentions.none(),  # player text never pings anyone
            tree_cls=GameTree,
            help_command=None,
            **options,
        )
        self.settings = settings
        self.db = db
        self.queue: Jobs = queue or QueueJobs()
        self.metrics = metrics  # bot.parts.metrics, served at GET /metrics by bot.parts.health
        self.interaction_meter = meter
        self.shards_claim = ShardClaim.of(self.shard_ids, self.shard_count)  # the guilds this process claims
        self.upload_limits: dict[int, int] = {}  # guild id -> attachment size limit seen on interactions
        # The parts, each given what it uses: the game service (made at each use), the servers'
        # languages, and this client typed by what the part calls of it.
        service = service_on(settings, db, self.queue)
        self.config = ConfigCache(db, settings, metrics)  # guild and channel configuration, live sessions' films
        languages = locale.Languages(settings, self.config, self)
        self.automod = AutoModRules(self)  # servers' AutoMod keyword rules, applied to game text
        self.edits = EditScheduler(self, metrics, limit=edit_budget[0], per=edit_budget[1])  # every edit, per channel
        # The board and the notifier wake each other: the board's call reads self.notifier when a
        # status message is sent, after both exist.
        self.board = StatusBoard(self, service=service, db=db, languages=languages, claim=self.shards_claim, edits=self.edits,
                                 wake_notifier=lambda: self.notifier.wake())
        self.vote_rounds = VoteRounds()  # the vote cog registers while loaded (bot.parts.privacy refreshes rounds)
        self.notifier = Notifier(self, service=service, db=db, languages=languages, config=self.config, board=self.board,
                                 edits=self.edits, metrics=metrics, upload_limits=self.upload_limits, lease=post_lease,
                                 claimant=claimant, retry_delays=post_retry_delays)
        privacy = PrivacyJobs(self, service=service, languages=languages, edits=self.edits, vote_rounds=self.vote_rounds,
                              claim=self.shards_claim)
        self.maintenance = Maintenance(self, service=service, settings=settings, languages=languages, claim=self.shards_claim,
                                       board=self.board, privacy=privacy, wake_notifier=self.notifier.wake,
                                       sweep_seconds=sweep_seconds)
        self.queue_watch = QueueWatch(service, metrics)  # the queue gauges and database_up
        metrics.watch_edit_queue(self.edits.pending_count)
        metrics.watch_gateway(self)
        self._sync_commands = sync_commands
        self._health_address = health_address
        self._health_runner = None
        self.health_port: int | None = None
        self._was_ready = False

    async def setup_hook(self) -> None:
        for ext in EXTENSIONS:
            await self.load_extension(ext)
        self.notifier.start()
        self.maintenance.start()
        self.queue_watch.start()
        if self._health_address is not None:
            self._health_runner, self.health_port = await health.start_server(
                self.metrics, *self._health_address, gateway=self, db=self.db, notifier=self.notifier)
        await self.tree.set_translator(CatalogTranslator())
        # One sync per application: the process that holds shard 0 (or every shard) makes it.
        if self._sync_commands and self.shards_claim.owns(None):
            await self.tree.sync()

    async def on_ready(self) -> None:
        log.info("connected as %s to %d guild(s)", self.user, len(self.guilds))
        freeze_startup_objects(again=self._was_ready)
        self._was_ready = True
        self.notifier.wake()  # post what finished while we were away

    async def on_shard_ready(self, shard_id: int) -> None:
        if self._was_ready:  # identified anew after the start: its old guild caches are garbage
            freeze_startup_objects(again=True)

    async def on_guild_join(self, guild: discord.Guild) -> None:
        self.notifier.wake()

    def dispatch(self, event_name: str, /, *args, **kwargs) -> None:
        # INTERACTION_CREATE's receipt, before any handler ran (see bot.parts.interaction_meter)
        if event_name == "interaction" and args:
            interaction = args[0]
            self.interaction_meter.received(interaction)
            # Here rather than in an on_interaction listener: a task less per interaction.
            if interaction.guild_id is not None:
                self.upload_limits[interaction.guild_id] = interaction.filesize_limit
        super().dispatch(event_name, *args, **kwargs)

    async def close(self) -> None:
        if self._health_runner is not None:
            await self._health_runner.cleanup()
            self._health_runner = None
        self.maintenance.close()
        await self.queue_watch.close()
        await self.notifier.close()
        await self.board.close()
        await self.edits.close()
        await super().close()
