"""The server looks up none of this machine's addresses.

Streamlit works out this machine's "internal" address with a UDP connect to 8.8.8.8 and its
"external" one with an HTTP request to checkip.amazonaws.com (``streamlit.net_util``): for
the start-up banner when it listens on every interface, and whenever a WebSocket arrives
from another origin (``server_util.is_url_from_allowed_origins``; any web page the user
visits can open one). With both answering "unknown", the banner shows the local URL and a
cross-origin WebSocket is refused; same-origin connections never ask.
"""

from __future__ import annotations


def _unknown() -> None:
    return None


def no_address_lookups() -> None:
    """Make Streamlit's address look-ups answer "unknown" without a network call (idempotent)."""
    from streamlit import net_util

    net_util.get_internal_ip = _unknown
    net_util.get_external_ip = _unknown
