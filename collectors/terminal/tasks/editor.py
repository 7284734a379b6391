"""Editor tasks: changing files in vim, and looking at one without changing it.

One task writes a git commit message in the vim that git opens.
"""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command, keys
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    all_of,
    git_commit,
    git_init,
    same_content,
    write_file,
)

_TODO_TXT = """\
- [x] rotate the TLS certificates
- [ ] upgrade postgres to 16
- [ ] review the on-call schedule
- [ ] clean up old feature flags
"""

_SITE_CONF = """\
server {
    listen 8080;
    server_name shop.example.local;
    root /srv/shop/public;

    client_max_body_size 1m;
    # debug_log /var/log/shop/debug.log;

    location /api/ {
        proxy_pass http://127.0.0.1:9000;
    }
}
"""

_DEPLOY_YML = """\
service: checkout
image: registry.local/checkout:1.8.2
replicas: 3
resources:
  cpu: 500m
  memory: 256Mi
env:
  LOG_LEVEL: info
  PAYMENT_PROVIDER: sandbox
"""

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="vim-add-todo-item",
        instruction=(
            "Open ~/work/todo.txt in vim and add '- [ ] write release notes for v1.4' as the "
            "last item, save, and show me the file."
        ),
        category="editor",
        setup=(write_file(f"{WORK}/todo.txt", _TODO_TXT),),
        steps=(
            command("cd ~/work"),
            command("vim todo.txt"),
            keys("G"),
            keys("o", "- [ ] write release notes for v1.4", "Escape"),
            keys(":wq", "Enter"),
            command("cat todo.txt"),
        ),
        check=same_content(f"{WORK}/todo.txt", _TODO_TXT + "- [ ] write release notes for v1.4\n"),
    ),
    TerminalTask(
        name="vim-edit-nginx-conf",
        instruction=(
            "Uploads to the shop fail. In ~/work/nginx/site.conf raise client_max_body_size "
            "from 1m to 20m and delete the commented-out debug_log line. Use vim."
        ),
        category="editor",
        setup=(write_file(f"{WORK}/nginx/site.conf", _SITE_CONF),),
        steps=(
            command("cd ~/work/nginx"),
            command("vim site.conf"),
            keys("/client_max_body_size", "Enter"),
            keys(":s/1m;/20m;/", "Enter"),
            keys("/debug_log", "Enter"),
            keys("dd"),
            keys(":wq", "Enter"),
            command("grep -n -e body_size -e debug site.conf"),
        ),
        check=same_content(
            f"{WORK}/nginx/site.conf",
            _SITE_CONF.replace("size 1m;", "size 20m;").replace(
                "    # debug_log /var/log/shop/debug.log;\n", ""
            ),
        ),
    ),
    TerminalTask(
        name="git-commit-message-in-vim",
        instruction=(
            "Commit the new meeting notes in ~/work/notes with the message 'Add notes from "
            "the March 5 planning meeting', writing the message in the editor."
        ),
        category="editor",
        setup=(
            git_init(f"{WORK}/notes"),
            write_file(f"{WORK}/notes/index.md", "# Meeting notes\n"),
            git_commit(f"{WORK}/notes", "Start meeting notes", 0),
            write_file(
                f"{WORK}/notes/2024-03-05-planning.md",
                "# Planning 2024-03-05\n\n- v1.4 ships Friday\n- Hiring: second SRE\n",
            ),
        ),
        steps=(
            command("cd ~/work/notes"),
            command("git status --short"),
            command("git add 2024-03-05-planning.md"),
            command("git commit"),
            keys("i", "Add notes from the March 5 planning meeting", "Escape"),
            keys(":wq", "Enter"),
            command("git log --oneline"),
        ),
        check=(
            f'cd {WORK}/notes && [ "$(git log -1 --format=%s)" = '
            "'Add notes from the March 5 planning meeting' ] && "
            '[ -z "$(git status --porcelain)" ]'
        ),
    ),
    TerminalTask(
        name="vim-look-without-changing",
        instruction=(
            "Check how many replicas ~/work/k8s/deploy.yml asks for, in vim, without changing "
            "the file, and note the line in replicas.txt."
        ),
        category="editor",
        setup=(write_file(f"{WORK}/k8s/deploy.yml", _DEPLOY_YML),),
        steps=(
            command("cd ~/work/k8s"),
            command("vim deploy.yml"),
            keys("/replicas", "Enter"),
            # A slip of the finger: the buffer is modified, so :q refuses (E37).
            keys("x"),
            keys(":q", "Enter"),
            keys(":q!", "Enter"),
            command("grep -n replicas deploy.yml | tee replicas.txt"),
        ),
        check=all_of(
            same_content(f"{WORK}/k8s/deploy.yml", _DEPLOY_YML),
            same_content(f"{WORK}/k8s/replicas.txt", "3:replicas: 3\n"),
        ),
    ),
)
