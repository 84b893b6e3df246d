"""libdevice under the cuda import path."""
from ..libdevice import *  # noqa: F401,F403
