"""Every user-visible string in one set of gettext catalogs (managed with Babel).

The bot, the play page and the refusals in game/errors.py translate through this package:

    from i18n import _, L_, ngettext, pgettext, use_locale

    _("No game is running in this channel.")                 # now, in the current locale
    _("This game is paused (%(reason)s).", reason=why)        # placeholders the gettext way
    ngettext("%(n)s turn", "%(n)s turns", count)              # n is the count, formatted per locale
    L_("Cancel")                                              # later: str() renders in the locale current then

The current locale is a context variable (i18n/context.py): the bot sets it from `interaction.locale` when an
interaction starts (bot/parts/locale.py) and to the server's language around public posts; the play
page sets it from the browser's languages. Outside any of these it is English, the source.

Catalogs live in i18n/locales/<locale>/LC_MESSAGES/messages.po, one per shipped locale, read and
compiled at first use; a locale is shipped by adding its .po (docs/i18n.md). `animegamer i18n`
extracts the strings from the code and the slash commands, updates every .po and checks them.
"""

from i18n.context import current_locale, use_locale
from i18n.translate import L_, N_, Lazy, _, ngettext, pgettext

__all__ = ["L_", "N_", "Lazy", "_", "current_locale", "ngettext", "pgettext", "use_locale"]
