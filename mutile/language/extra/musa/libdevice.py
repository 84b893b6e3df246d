"""libdevice under the musa import path."""
from ..libdevice import *  # noqa: F401,F403
