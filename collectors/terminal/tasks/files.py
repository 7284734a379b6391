"""File tasks: sorting, finding, backing up, cleaning and renaming files in ``~/work``."""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    join_lines,
    same_content,
    write_file,
)

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="organize-downloads",
        instruction=(
            "My ~/work/downloads folder is a mess. Sort the files into images/, docs/ and data/ "
            "subfolders (pictures, documents and CSV files) and show me the result."
        ),
        category="files",
        setup=(
            f"mkdir -p {WORK}/downloads && cd {WORK}/downloads && "
            "printf '\\377\\330\\377\\340JFIF-beach' > IMG_2041.jpg && "
            "printf '\\377\\330\\377\\340JFIF-dinner' > IMG_2042.jpg && "
            "printf '\\211PNG-login-page' > screenshot-login.png && "
            "printf '%%PDF-1.4 invoice 2024-03' > invoice-2024-03.pdf",
            write_file(
                f"{WORK}/downloads/meeting-notes.txt",
                "Planning meeting 2024-03-05\n- ship v1.4 by Friday\n- hire a second SRE\n",
            ),
            write_file(
                f"{WORK}/downloads/contacts.csv",
                "name,email\nAda Lovelace,ada@example.org\nAlan Turing,alan@example.org\n",
            ),
            write_file(f"{WORK}/downloads/budget.csv", "month,amount\n2024-01,1200\n2024-02,950\n"),
        ),
        steps=(
            command("cd ~/work/downloads"),
            command("ls -l"),
            command("mkdir -p images docs data"),
            command("mv *.jpg *.png images/"),
            command("mv *.pdf *.txt docs/"),
            command("mv *.csv data/"),
            command("tree"),
        ),
        check=(
            f"cd {WORK}/downloads && test -f images/IMG_2041.jpg && test -f images/IMG_2042.jpg "
            "&& test -f images/screenshot-login.png && test -f docs/invoice-2024-03.pdf "
            "&& test -f docs/meeting-notes.txt && test -f data/contacts.csv "
            '&& test -f data/budget.csv && [ -z "$(find . -maxdepth 1 -type f)" ]'
        ),
    ),
    TerminalTask(
        name="find-large-logs",
        instruction=(
            "Disk is filling up. Which log files under ~/work/logs are bigger than 50 KB? "
            "Save their paths, sorted, to ~/work/big-logs.txt."
        ),
        category="files",
        setup=(
            f"mkdir -p {WORK}/logs/app {WORK}/logs/nginx {WORK}/logs/cron",
            f"seq 1 40 | sed 's/^/2024-03-01 12:00:01 INFO worker heartbeat seq=/' "
            f"> {WORK}/logs/app/app.log",
            f"seq 1 4000 | sed 's/^/2024-02-29 23:59:59 INFO worker heartbeat seq=/' "
            f"> {WORK}/logs/app/app.log.1",
            f"seq 1 5000 | sed 's|^|10.0.0.7 - - \"GET /api/items?page=|' "
            f"> {WORK}/logs/nginx/access.log",
            f"seq 1 25 | sed 's/^/2024-03-01 [warn] upstream slow, request=/' "
            f"> {WORK}/logs/nginx/error.log",
            f"seq 1 12 | sed 's/^/CRON run backup.sh job=/' > {WORK}/logs/cron/cron.log",
        ),
        steps=(
            command("cd ~/work/logs"),
            command("du -sh *"),
            command("find . -name '*.log*' -size +50k"),
            command("find . -name '*.log*' -size +50k | sort > ~/work/big-logs.txt"),
            command("cat ~/work/big-logs.txt"),
            command("ls -lh app nginx"),
        ),
        check=same_content(
            f"{WORK}/big-logs.txt", join_lines("./app/app.log.1", "./nginx/access.log")
        ),
    ),
    TerminalTask(
        name="backup-config-files",
        instruction=(
            "Before I touch the configs, back up every .conf file in ~/work/site/config into "
            "~/work/site/backup with a .bak suffix and make sure the copies are identical."
        ),
        category="files",
        setup=(
            write_file(
                f"{WORK}/site/config/app.conf",
                "[server]\nport = 8080\nworkers = 4\n\n[features]\nsearch = on\n",
            ),
            write_file(
                f"{WORK}/site/config/db.conf",
                "host = localhost\nport = 5432\nname = site\nuser = site_rw\npool = 10\n",
            ),
            write_file(f"{WORK}/site/config/cache.conf", "backend = memory\nttl_seconds = 300\n"),
            write_file(f"{WORK}/site/config/README.md", "# Config\nOne file per subsystem.\n"),
        ),
        steps=(
            command("cd ~/work/site"),
            command("ls -l config"),
            command("mkdir -p backup"),
            command('for f in config/*.conf; do cp -v "$f" "backup/$(basename "$f").bak"; done'),
            command("ls -l backup"),
            command("diff config/db.conf backup/db.conf.bak && echo identical"),
        ),
        check=(
            f"cd {WORK}/site && cmp -s config/app.conf backup/app.conf.bak "
            "&& cmp -s config/db.conf backup/db.conf.bak "
            "&& cmp -s config/cache.conf backup/cache.conf.bak "
            '&& [ "$(ls backup | wc -l)" -eq 3 ]'
        ),
    ),
    TerminalTask(
        name="clean-build-artifacts",
        instruction=(
            "Clean up ~/work/webapp before I zip it: remove __pycache__ folders, *.tmp files, "
            "the build/ directory and any empty directories, but keep the sources."
        ),
        category="files",
        setup=(
            write_file(f"{WORK}/webapp/src/app.py", "from views import index\n\nprint(index())\n"),
            write_file(f"{WORK}/webapp/src/views.py", "def index():\n    return 'hello'\n"),
            write_file(f"{WORK}/webapp/tests/test_views.py", "from views import index\n"),
            write_file(f"{WORK}/webapp/README.md", "# webapp\nA tiny web app.\n"),
            f"mkdir -p {WORK}/webapp/src/__pycache__ {WORK}/webapp/tests/__pycache__ "
            f"{WORK}/webapp/build/lib {WORK}/webapp/logs/old {WORK}/webapp/uploads && "
            f"cd {WORK}/webapp && printf 'pyc' > src/__pycache__/views.cpython-311.pyc && "
            "printf 'pyc' > src/__pycache__/app.cpython-311.pyc && "
            "printf 'pyc' > tests/__pycache__/test_views.cpython-311.pyc && "
            "printf 'bin' > build/lib/app.bin && printf 'x' > src/.views.py.tmp && "
            "printf 'x' > upload-chunk.tmp",
        ),
        steps=(
            command("cd ~/work/webapp"),
            command("tree -a"),
            command("find . -name '__pycache__' -type d -prune -exec rm -rf {} +"),
            command("find . -name '*.tmp' -print -delete"),
            command("rm -rf build"),
            command("find . -type d -empty -print -delete"),
            command("tree -a"),
        ),
        check=(
            f"cd {WORK}/webapp && [ -z \"$(find . -name '__pycache__' -o -name '*.tmp' "
            '-o -name build -o -type d -empty)" ] && test -f src/app.py && test -f src/views.py '
            "&& test -f tests/test_views.py && test -f README.md"
        ),
    ),
    TerminalTask(
        name="rename-photos-batch",
        instruction=(
            "Rename the camera files in ~/work/photos from IMG_0001.JPG style to "
            "lisbon-0001.jpg style (lowercase extension)."
        ),
        category="files",
        setup=(
            f"mkdir -p {WORK}/photos && cd {WORK}/photos && "
            "for n in 0001 0002 0003 0004 0005 0006; do printf 'JPEG%s' $n > IMG_$n.JPG; done",
        ),
        steps=(
            command("cd ~/work/photos"),
            command("ls"),
            command('for f in IMG_*.JPG; do n=${f#IMG_}; mv -v "$f" "lisbon-${n%.JPG}.jpg"; done'),
            command("ls -l"),
        ),
        check=(
            f"cd {WORK}/photos && [ \"$(ls | tr '\\n' ' ')\" = "
            "'lisbon-0001.jpg lisbon-0002.jpg lisbon-0003.jpg lisbon-0004.jpg lisbon-0005.jpg "
            'lisbon-0006.jpg \' ] && [ "$(cat lisbon-0004.jpg)" = JPEG0004 ]'
        ),
    ),
)
