"""The search domain's sandbox image: the corpus, its Xapian index, the site server, the driver.

``image/Dockerfile`` builds everything at image build time (the corpus from Debian packages,
the index, ``/opt/worldtrace/corpus.json`` with the corpus identity); ``image/search_driver.py``
is the in-container driver whose docstring is the protocol the environment speaks.
"""

from __future__ import annotations

from pathlib import Path

from worldtrace.sandboxes.images import DRIVER_RUNTIME, ImageDefinition

IMAGE_FOLDER = Path(__file__).parent / "image"
IMAGE = ImageDefinition("search", IMAGE_FOLDER, shared_files=(DRIVER_RUNTIME,))
"""The one sandbox image of the domain."""
IMAGE_TAG = IMAGE.tag
"""``worldtrace/search:latest``."""
DRIVER = ("/opt/search-venv/bin/python", "/opt/worldtrace/search_driver.py")
"""The argv of the in-container driver (add ``--observe`` for the last look)."""
CORPUS_JSON = "/opt/worldtrace/corpus.json"
"""Where the corpus identity is inside the image."""
DOCUMENTS_JSONL = "/srv/search/documents.jsonl"
"""Where the document listing (url, title, date, collection, package, bytes) is in the image."""
