"""Error tasks: typos, missing permissions and files, exit statuses, and mistakes undone."""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    all_of,
    same_content,
    write_file,
)

_DEPLOY_SH = """\
#!/bin/sh
set -e
. ./config/prod.conf
echo "deploying $APP $VERSION to $TARGET"
echo "$APP $VERSION $TARGET" > deployed.txt
echo "deploy complete"
"""

_PARSER_PY = """\
def parse(tokens):
    # TODO: report the position of unexpected tokens
    tree = []
    for token in tokens:
        tree.append(token)  # TODO: build real nodes
    return tree
"""

_LEXER_PY = """\
def tokenize(text):
    # TODO: handle string literals
    return text.split()
"""

_CONFIG_EXAMPLE_YML = "strict: true\nmax_depth: 64\n"

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="typo-command-not-found",
        instruction=(
            "Write the versions of git, python3 and jq into ~/work/tool-versions.txt, one per line."
        ),
        category="errors",
        setup=(f"mkdir -p {WORK}",),
        steps=(
            command("cd ~/work"),
            command("gti --version"),
            command("git --version > tool-versions.txt"),
            command("pyhton3 --version"),
            command("python3 --version >> tool-versions.txt"),
            command("jq --verison"),
            command("jq --version >> tool-versions.txt"),
            command("cat tool-versions.txt"),
        ),
        check=(
            f'[ "$(wc -l < {WORK}/tool-versions.txt)" -eq 3 ] && '
            f"sed -n 1p {WORK}/tool-versions.txt | grep -q '^git version ' && "
            f"sed -n 2p {WORK}/tool-versions.txt | grep -q '^Python 3\\.' && "
            f"sed -n 3p {WORK}/tool-versions.txt | grep -q '^jq-'"
        ),
    ),
    TerminalTask(
        name="deploy-permission-and-missing-config",
        instruction=(
            "Run the deploy script in ~/work/deploy-tool and get it to finish successfully."
        ),
        category="errors",
        setup=(
            write_file(f"{WORK}/deploy-tool/deploy.sh", _DEPLOY_SH, mode="644"),
            write_file(
                f"{WORK}/deploy-tool/config/prod.conf.example",
                "APP=checkout\nVERSION=1.8.3\nTARGET=prod-eu-1\n",
            ),
        ),
        steps=(
            command("cd ~/work/deploy-tool"),
            command("./deploy.sh"),
            command("ls -l deploy.sh"),
            command("chmod +x deploy.sh"),
            command("./deploy.sh"),
            command("ls config"),
            command("cp config/prod.conf.example config/prod.conf"),
            command("./deploy.sh"),
            command("cat deployed.txt"),
        ),
        check=(
            f"test -x {WORK}/deploy-tool/deploy.sh && "
            f"[ \"$(cat {WORK}/deploy-tool/deployed.txt)\" = 'checkout 1.8.3 prod-eu-1' ]"
        ),
    ),
    TerminalTask(
        name="exit-codes-release-check",
        instruction=(
            "Before releasing ~/work/minilang: are there FIXME or TODO markers left in src/, and "
            "is there a config.yml? Create the config from the example if needed and save the "
            "TODO counts per file to todo-count.txt."
        ),
        category="errors",
        setup=(
            write_file(f"{WORK}/minilang/src/parser.py", _PARSER_PY),
            write_file(f"{WORK}/minilang/src/lexer.py", _LEXER_PY),
            write_file(f"{WORK}/minilang/config.example.yml", _CONFIG_EXAMPLE_YML),
        ),
        steps=(
            command("cd ~/work/minilang"),
            command('grep -rn FIXME src/; echo "exit status: $?"'),
            command("grep -rn TODO src/"),
            command("test -f config.yml; echo $?"),
            command("ls config.yml"),
            command("cp config.example.yml config.yml && test -f config.yml && echo 'config ok'"),
            command("grep -c TODO src/*.py > todo-count.txt"),
            command("cat todo-count.txt"),
        ),
        check=all_of(
            same_content(f"{WORK}/minilang/config.yml", _CONFIG_EXAMPLE_YML),
            same_content(f"{WORK}/minilang/todo-count.txt", "src/lexer.py:1\nsrc/parser.py:2\n"),
        ),
    ),
    TerminalTask(
        name="remove-old-project-mistakes",
        instruction=(
            "Delete the old-site project from ~/work/projects (keep new-site) and add an empty "
            "archive/ folder there."
        ),
        category="errors",
        setup=(
            write_file(f"{WORK}/projects/old-site/index.html", "<h1>Old site</h1>\n"),
            write_file(f"{WORK}/projects/old-site/css/site.css", "body { color: #333; }\n"),
            write_file(f"{WORK}/projects/new-site/index.html", "<h1>New site</h1>\n"),
            write_file(f"{WORK}/notes.txt", "old-site is retired since February.\n"),
        ),
        steps=(
            command("cd ~/work"),
            command("cd notes.txt"),
            command("ls projects"),
            command("rmdir projects/old-site"),
            command("rm projects/old-site"),
            command("rm -r projects/old-site"),
            command("mkdir projects"),
            command("mkdir projects/archive"),
            command("ls -l projects"),
        ),
        check=(
            f"! test -e {WORK}/projects/old-site && test -f {WORK}/projects/new-site/index.html && "
            f"test -d {WORK}/projects/archive && test -f {WORK}/notes.txt"
        ),
    ),
)
