"""Questions about using git, answered by the git-doc HTML manual pages (``git/<page>.html``)."""

from __future__ import annotations

from worldtrace.collectors.search.actions import dict_memory, web_extractor, web_search
from worldtrace.collectors.search.tasks import ANSWER_KEY, SearchTask, search_task

GIT = "http://docs.localhost/git/"

TASKS: tuple[SearchTask, ...] = (
    search_task(
        "rebase-autostash",
        "git",
        "How do I make git rebase stash my uncommitted changes before it starts and apply "
        "them again when it is done? Which option of git rebase does that?",
        answers=("--autostash", "rebase.autoStash"),
        documents=(GIT + "git-rebase.html",),
        passage="Automatically create a temporary stash entry",
        query="git rebase stash local changes before rebase autostash",
        goal="the option that stashes uncommitted changes before a rebase",
    ),
    search_task(
        "undo-commit-keep-changes",
        "git",
        "I committed too early. Which mode of git reset moves the branch back to HEAD^ but "
        "leaves all my changes staged, touching neither the index nor the working tree?",
        answers=("--soft",),
        documents=(GIT + "git-reset.html",),
        passage="Does not touch the index file or the working tree at all",
        query="git reset undo commit keep changes index working tree",
        goal="the reset mode that keeps the index and the working tree",
    ),
    search_task(
        "stash-untracked",
        "git",
        "git stash leaves my new, untracked files behind. Which option of git stash push "
        "stashes the untracked files too?",
        answers=("--include-untracked", "-u"),
        documents=(GIT + "git-stash.html",),
        passage="all untracked files are also stashed and then cleaned up with",
        query="git stash untracked files",
        goal="the option that also stashes untracked files",
        case_sensitive=True,
    ),
    search_task(
        "amend-last-commit",
        "git",
        "Which git commit option replaces the last commit on the current branch with a new "
        "one, for example to fix its message?",
        answers=("--amend",),
        documents=(GIT + "git-commit.html",),
        passage="Replace the tip of the current branch by creating a new",
        query="git commit replace tip of current branch amend",
        goal="the option that replaces the last commit",
    ),
    search_task(
        "shallow-clone",
        "git",
        "How do I clone a big repository with only the last few commits of history? Which "
        "option of git clone makes such a shallow clone?",
        answers=("--depth",),
        documents=(GIT + "git-clone.html",),
        passage="clone with a history truncated to the",
        query="git clone shallow history truncated number of commits",
        goal="the option that makes a shallow clone",
    ),
    search_task(
        "safe-force-push",
        "git",
        "After a rebase I must force-push, but only if nobody else pushed to the branch in "
        "the meantime. Which git push option refuses the push when the remote ref is not the "
        "value I expect?",
        answers=("--force-with-lease",),
        documents=(GIT + "git-push.html",),
        passage="This option overrides this restriction if the current value of the",
        query="git push force only if remote ref has expected value",
        goal="the safer alternative to --force",
    ),
    search_task(
        "pull-rebase-config",
        "git",
        "Which git configuration variable makes every git pull rebase instead of merge, for "
        "all branches?",
        answers=("pull.rebase",),
        documents=(GIT + "git-pull.html", GIT + "git-config.html"),
        passage="reconcile the divergent branches with",
        # git pull's page names the variable; git config's page says what it does.
        steps=(
            web_search("git config pull rebase instead of merge default"),
            web_extractor(GIT + "git-pull.html", "the configuration that makes git pull rebase"),
            web_extractor(GIT + "git-config.html", "what pull.rebase does"),
            dict_memory("add", ANSWER_KEY, "pull.rebase"),
        ),
    ),
    search_task(
        "log-follow-renames",
        "git",
        "git log on a file stops at the commit where the file was renamed. Which option makes "
        "git log continue listing the file's history beyond renames?",
        answers=("--follow",),
        documents=(GIT + "git-log.html",),
        passage="Continue listing the history of a file beyond renames",
        query="git log history of a file beyond renames",
        goal="the option that follows a file across renames",
    ),
    search_task(
        "cherry-pick-record-origin",
        "git",
        "Which option of git cherry-pick appends a line '(cherry picked from commit ...)' to "
        "the commit message so that the original commit can be found?",
        answers=("-x",),
        documents=(GIT + "git-cherry-pick.html",),
        passage="When recording the commit, append a line that says",
        query="git cherry-pick cherry picked from commit line message",
        goal="the option that records the original commit in the message",
        case_sensitive=True,
    ),
    # A vague first query, then a refined one with the name the first results suggest.
    search_task(
        "rerere-enable",
        "git",
        "I keep resolving the same merge conflicts again and again. Which git configuration "
        "variable turns on recording resolved conflicts so that git resolves them "
        "automatically next time?",
        answers=("rerere.enabled",),
        documents=(GIT + "git-config.html", GIT + "git-rerere.html"),
        passage="Activate recording of resolved conflicts, so that identical",
        steps=(
            web_search("git reuse recorded conflict resolution"),
            web_search("rerere.enabled git config"),
            web_extractor(GIT + "git-config.html", "the variable that enables rerere"),
            dict_memory("add", ANSWER_KEY, "rerere.enabled"),
            dict_memory("retrieve", ANSWER_KEY),
        ),
    ),
)
