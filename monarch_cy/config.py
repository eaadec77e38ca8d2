"""monarch_cy.config: Monarch's runtime configuration API (``monarch.config``).

Re-exports only; the implementation, the keys and what each does here live in
:mod:`monarch_cy._config_api` (and ``docs/monarch-compat.md``).  Keys with a
monarch_cy equivalent set that ``MONARCH_CY_*`` variable for this process
(:mod:`monarch_cy._config`); the others are recorded only.
"""

from monarch_cy._config_api import (ChannelTransport, ConfigValueError, Encoding,
                                    clear_runtime_config, configure, configured,
                                    get_global_config, get_runtime_config)
from monarch_cy._config_pytest import parametrize_config, parametrize_config_pointwise

__all__ = [
    "ChannelTransport",
    "ConfigValueError",
    "Encoding",
    "clear_runtime_config",
    "configure",
    "configured",
    "get_global_config",
    "get_runtime_config",
    "parametrize_config",
    "parametrize_config_pointwise",
]
