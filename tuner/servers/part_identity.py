"""The root part of the adapter contract (tuner/servers/base.py): a server's name and the app
interfaces it runs."""

from __future__ import annotations

import abc

from tuner.apps import AppRef, Interface
from tuner.errors import ConfigError


class IdentityPart(abc.ABC):
    """The root of the contract: which server this is and which apps it runs, checked by every
    operation that takes an app."""

    name: str
    # The app interfaces the server runs. For one that runs both, `serving` returns it set up
    # for one: a copy of this adapter, or the adapter `interface_adapters` names for it.
    interfaces: frozenset[Interface] = frozenset({Interface.WSGI})

    def check_app(self, app: AppRef) -> None:
        """Raise ConfigError for an app whose interface this adapter is not set up to serve."""
        if app.interface not in self.interfaces:
            served = " or ".join(sorted(i.value.upper() for i in self.interfaces))
            raise ConfigError(
                f"{self.name} (as set up here) serves {served} apps; {app} is "
                f"{app.interface.describe()}"
            )
