"""Start the app's Streamlit server: ``python app/serve.py [streamlit flags]`` (``perfmodel app`` runs it).

The settings are Streamlit's own, from ``app/.streamlit/config.toml`` (loopback only, no
usage statistics, the upload limit); flags given here override them. Before the server
starts, Streamlit's look-ups of this machine's addresses are switched off
(``appkit.offline``), so it makes no network call of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP = HERE / "streamlit_app.py"


def main(argv: list[str]) -> None:
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from streamlit.web import cli

    from appkit.offline import no_address_lookups

    no_address_lookups()
    cli.main(["run", str(APP), *argv], prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
