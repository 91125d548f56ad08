#!/usr/bin/env python3
"""Downloads one sdist file straight from the package index (PIP_INDEX_URL, else PyPI's simple index).

    scripts/fetch-sdist.py PROJECT FILE-NAME DEST

Not `pip download --no-binary :all:`: for an sdist, pip runs the package's build backend to read
its metadata, and with `:all:` it first builds that backend's own dependencies (cmake, ninja) from
source, which took tens of minutes on two cores for a file of a few MB. Callers check the
checksum where they pin one. DEST is written whole or not at all (DEST.part, then renamed).
"""

import os
import re
import sys
import urllib.parse
import urllib.request


def sdist_url(project: str, name: str) -> str:
    """The address of file `name` on the index page of `project`."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    page_url = f"{index}/{project}/"
    with urllib.request.urlopen(page_url, timeout=180) as r:
        page = r.read().decode()
    for href in re.findall(r'href="([^"]+)"', page):
        if urllib.parse.urlsplit(href).path.endswith("/" + name):
            return urllib.parse.urljoin(page_url, href).split("#")[0]
    sys.exit(f"fetch-sdist.py: {name} is not listed at {page_url}")


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    project, name, dest = sys.argv[1:4]
    url = sdist_url(project, name)
    with urllib.request.urlopen(url, timeout=180) as r, open(dest + ".part", "wb") as f:
        while chunk := r.read(1 << 20):
            f.write(chunk)
    os.replace(dest + ".part", dest)


if __name__ == "__main__":
    main()
