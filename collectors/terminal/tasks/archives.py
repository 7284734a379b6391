"""Archive tasks: tar, zip and gzip, made and unpacked."""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.tasks.helpers import WORK, TerminalTask, write_file

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="tar-backup-and-restore",
        instruction=(
            "Make a gzipped tarball of ~/work/blog called blog-backup.tar.gz, list what is in "
            "it, and verify it by restoring it to /tmp/restore and comparing."
        ),
        category="archives",
        setup=(
            write_file(
                f"{WORK}/blog/config.toml", 'title = "Notes from the shell"\ntheme = "ink"\n'
            ),
            write_file(f"{WORK}/blog/posts/2024-01-pipes.md", "# Pipes\n\nSmall tools, joined.\n"),
            write_file(f"{WORK}/blog/posts/2024-02-grep.md", "# grep\n\nSearch all the things.\n"),
            write_file(f"{WORK}/blog/posts/drafts/awk.md", "# awk (draft)\n"),
            f"mkdir -p {WORK}/blog/static && printf 'PNGDATA' > {WORK}/blog/static/logo.png",
        ),
        steps=(
            command("cd ~/work"),
            command("tar czf blog-backup.tar.gz blog"),
            command("tar tzf blog-backup.tar.gz"),
            command("ls -lh blog-backup.tar.gz"),
            command("mkdir -p /tmp/restore && tar xzf blog-backup.tar.gz -C /tmp/restore"),
            command("diff -r blog /tmp/restore/blog && echo 'backup verified'"),
        ),
        check=(
            f"tar tzf {WORK}/blog-backup.tar.gz | grep -qx blog/posts/drafts/awk.md && "
            f"tar tzf {WORK}/blog-backup.tar.gz | grep -qx blog/static/logo.png && "
            f"diff -r {WORK}/blog /tmp/restore/blog >/dev/null"
        ),
    ),
    TerminalTask(
        name="zip-quarterly-reports",
        instruction=(
            "Zip the CSV reports in ~/work/reports (not the drafts) into q1-reports.zip, list "
            "its contents, and unzip it into ~/work/shared to check."
        ),
        category="archives",
        setup=(
            write_file(f"{WORK}/reports/2024-01-revenue.csv", "day,eur\n01,1200\n02,980\n"),
            write_file(f"{WORK}/reports/2024-02-revenue.csv", "day,eur\n01,1310\n02,1045\n"),
            write_file(f"{WORK}/reports/2024-03-revenue.csv", "day,eur\n01,1422\n02,1101\n"),
            write_file(f"{WORK}/reports/summary.txt", "Q1 revenue grew 18% over Q4.\n"),
            write_file(f"{WORK}/reports/drafts/2024-04-revenue.csv", "day,eur\n01,?\n"),
        ),
        steps=(
            command("cd ~/work/reports"),
            command("ls -R"),
            command("zip q1-reports.zip *.csv"),
            command("unzip -l q1-reports.zip"),
            command("mkdir -p ../shared && unzip -o q1-reports.zip -d ../shared"),
            command("ls -l ../shared"),
        ),
        check=(
            f"[ \"$(unzip -Z1 {WORK}/reports/q1-reports.zip | sort | paste -sd' ')\" = "
            "'2024-01-revenue.csv 2024-02-revenue.csv 2024-03-revenue.csv' ] && "
            f"cmp -s {WORK}/reports/2024-02-revenue.csv {WORK}/shared/2024-02-revenue.csv"
        ),
    ),
    TerminalTask(
        name="gzip-rotated-logs",
        instruction=(
            "Compress the rotated logs in ~/work/applogs (app.log.1 to app.log.3, not the live "
            "app.log) and then find the 'timeout' lines in them without unpacking, saving them "
            "to timeouts.txt."
        ),
        category="archives",
        setup=(
            f"mkdir -p {WORK}/applogs && cd {WORK}/applogs && "
            "for n in 1 2 3; do seq 1 300 | awk -v d=$n '{ if ($1 % 40 == 0) "
            'print "2024-02-2" d " ERROR upstream timeout after 30s req=" $1; '
            'else print "2024-02-2" d " INFO ok req=" $1 }\' > app.log.$n; done && '
            "seq 1 20 | sed 's/^/2024-03-01 INFO ok req=/' > app.log",
        ),
        steps=(
            command("cd ~/work/applogs"),
            command("ls -lh"),
            command("gzip app.log.[0-9]"),
            command("ls -lh"),
            command("zcat app.log.2.gz | head -3"),
            command("zgrep -c timeout app.log.*.gz"),
            command("zgrep -h timeout app.log.*.gz > timeouts.txt"),
            command("wc -l timeouts.txt"),
        ),
        check=(
            f"cd {WORK}/applogs && test -f app.log.1.gz && test -f app.log.2.gz && "
            "test -f app.log.3.gz && ! test -e app.log.1 && test -f app.log && "
            '[ "$(wc -l < timeouts.txt)" -eq 21 ]'
        ),
    ),
)
