"""``python -m tests.android.standin --port PORT``: one stand-in device, in the foreground."""

from __future__ import annotations

import argparse

from tests.android.standin import StandinPhone


def main() -> None:
    """Serve a stand-in device until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=5555, help="adb port on 127.0.0.1")
    port = parser.parse_args().port
    phone = StandinPhone(port)
    print(f"stand-in device listening: adb connect {phone.serial}", flush=True)
    try:
        phone.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        phone.stop()


if __name__ == "__main__":
    main()
