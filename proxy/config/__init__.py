"""config.toml: each key declared once (`sections`), the key table read from those declarations (`keys`),
and loading a file into typed settings with every problem named (`load`). The ground floor of `proxy`:
any of its subpackages may import it; it imports none of them."""

from .declare import Key, Section
from .keys import KEYS, SECTIONS
from .load import Config, ConfigError, load_config, parse_config, toml_key
from .sections import (
    LaprasSettings,
    LoadSettings,
    PrivacySettings,
    ServerSettings,
    TlsSettings,
    User,
    parse_listen,
)

__all__ = [
    "KEYS",
    "SECTIONS",
    "Config",
    "ConfigError",
    "Key",
    "LaprasSettings",
    "LoadSettings",
    "PrivacySettings",
    "Section",
    "ServerSettings",
    "TlsSettings",
    "User",
    "load_config",
    "parse_config",
    "parse_listen",
    "toml_key",
]
