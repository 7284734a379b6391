"""Scripted tasks on the trac site: Trac 1.6 for "Skylark", a photo gallery project.

Every step was written against the page as the browser sees it. Quirks of Trac's pages that
shape the scripts:

* the wiki editor's text area has no accessible name (``textbox ''``) and neither has the
  search box in the header, which comes first on every page, so the text area cannot be named;
  Trac focuses it when the editor opens, so the scripts type into it with the keyboard;
* on a ticket page the "Modify Ticket" section is folded; its link unfolds it before the
  ticket's fields and actions can be used;
* the header's "Search" button also comes before the search page's own, so searches are
  submitted with Enter; the results page loads after the key press has returned, so a short
  ``noop`` lets it arrive before the last observation.

Data checks query Trac's own SQLite database (tables ``ticket``, ``ticket_change``,
``wiki``); tickets 1-36 are the seeded ones, so a new ticket is number 37.
"""

from __future__ import annotations

from worldtrace.collectors.web.tasks import DataCheck, PageCheck, WebTask

TASKS: tuple[WebTask, ...] = (
    # --- create -------------------------------------------------------------------------------
    WebTask(
        name="trac-create-ticket",
        instruction=(
            "File an enhancement ticket 'Export an album as a ZIP file' for the Albums "
            "component in milestone 2.0 with minor priority."
        ),
        site="trac",
        category="create",
        start_path="/",
        steps=(
            "click({link 'NEW TICKET'})",
            "fill({textbox 'Summary:'}, 'Export an album as a ZIP file')",
            "fill({textbox 'Description:'}, 'Let visitors download a whole album as one ZIP.')",
            "select_option({combobox 'Type:'}, 'enhancement')",
            "select_option({combobox 'Priority:'}, 'minor')",
            "select_option({combobox 'Milestone:'}, '2.0')",
            "select_option({combobox 'Component:'}, 'Albums')",
            "click({button 'Create ticket'})",
        ),
        check=DataCheck(
            "select id, type, priority, milestone, component, status from ticket "
            "where summary = 'Export an album as a ZIP file'",
            (
                {
                    "id": 37,
                    "type": "enhancement",
                    "priority": "minor",
                    "milestone": "2.0",
                    "component": "Albums",
                    "status": "new",
                },
            ),
        ),
    ),
    WebTask(
        name="trac-create-defect-as-reporter",
        instruction=(
            "As user grace, report a critical defect in the Uploads component: uploads fail "
            "for file names containing emoji."
        ),
        site="trac",
        category="create",
        start_path="/newticket",
        steps=(
            "fill({textbox 'Summary:'}, 'Uploads fail for file names containing emoji')",
            "fill({textbox 'Your email or username:'}, 'grace')",
            "fill({textbox 'Description:'}, 'Uploading \\'beach 🌊.jpg\\' stops with HTTP 500.')",
            "select_option({combobox 'Priority:'}, 'critical')",
            "select_option({combobox 'Component:'}, 'Uploads')",
            "click({button 'Create ticket'})",
        ),
        check=DataCheck(
            "select type, priority, component, reporter from ticket "
            "where summary = 'Uploads fail for file names containing emoji'",
            (
                {
                    "type": "defect",
                    "priority": "critical",
                    "component": "Uploads",
                    "reporter": "grace",
                },
            ),
        ),
    ),
    WebTask(
        name="trac-create-wiki-page",
        instruction=(
            "Create the wiki page MeetingNotes/2024-03-04 saying that 1.1 is feature-frozen."
        ),
        site="trac",
        category="create",
        start_path="/wiki/MeetingNotes/2024-03-04",
        steps=(
            "click({button 'Create this page'})",
            # the editor's text area is focused when it opens (see the module docstring)
            "keyboard_type('= Meeting 2024-03-04 =\\n\\n * 1.1 is feature-frozen.\\n')",
            "fill({textbox 'Comment about this change (optional):'}, 'Meeting notes')",
            "click({button 'Submit changes'})",
        ),
        check=DataCheck(
            "select version, comment from wiki where name = 'MeetingNotes/2024-03-04' "
            "and text like '%1.1 is feature-frozen.%'",
            ({"version": 1, "comment": "Meeting notes"},),
        ),
    ),
    # --- form -----------------------------------------------------------------------------------
    WebTask(
        name="trac-comment-ticket",
        instruction=(
            "Add a comment to ticket #12 saying that lazy loading is merged and the page "
            "now renders in 2 s."
        ),
        site="trac",
        category="form",
        start_path="/ticket/12",
        steps=(
            "fill({textbox 'You may use WikiFormatting here.'}, "
            "'Lazy loading is merged; the page now renders in 2 s.')",
            "click({button 'Submit changes'})",
        ),
        check=DataCheck(
            "select author from ticket_change where ticket = 12 and field = 'comment' "
            "and newvalue = 'Lazy loading is merged; the page now renders in 2 s.'",
            ({"author": "anonymous"},),
        ),
    ),
    # --- edit -----------------------------------------------------------------------------------
    WebTask(
        name="trac-resolve-ticket-wontfix",
        instruction="Close ticket #14 (Add a dark theme) as wontfix with a short explanation.",
        site="trac",
        category="edit",
        start_path="/ticket/14",
        steps=(
            "click({link 'Modify Ticket'})",
            "click({radio 'resolve'})",
            # the resolution list next to "resolve" is the page's only unnamed list
            "select_option({combobox ''}, 'wontfix')",
            "fill({textbox 'You may use WikiFormatting here.'}, 'Out of scope for 1.1.')",
            "click({button 'Submit changes'})",
        ),
        check=DataCheck(
            "select status, resolution from ticket where id = 14",
            ({"status": "closed", "resolution": "wontfix"},),
        ),
    ),
    WebTask(
        name="trac-change-priority",
        instruction="Raise the priority of ticket #27 (keyboard shortcuts) to major.",
        site="trac",
        category="edit",
        start_path="/ticket/27",
        steps=(
            "click({link 'Modify Ticket'})",
            "select_option({combobox 'Priority:'}, 'major')",
            "click({button 'Submit changes'})",
        ),
        check=DataCheck(
            "select t.priority, c.oldvalue from ticket t join ticket_change c on c.ticket = t.id "
            "where t.id = 27 and c.field = 'priority'",
            ({"priority": "major", "oldvalue": "trivial"},),
        ),
    ),
    WebTask(
        name="trac-accept-ticket",
        instruction="Accept ticket #10 (REST API: token authentication) so that you own it.",
        site="trac",
        category="edit",
        start_path="/ticket/10",
        steps=(
            "click({link 'Modify Ticket'})",
            "click({radio 'accept'})",
            "click({button 'Submit changes'})",
        ),
        check=DataCheck(
            "select status, owner from ticket where id = 10",
            ({"status": "accepted", "owner": "anonymous"},),
        ),
    ),
    WebTask(
        name="trac-edit-keywords",
        instruction="Add the keyword 'mobile' to ticket #28 (two-factor authentication).",
        site="trac",
        category="edit",
        start_path="/ticket/28",
        steps=(
            "click({link 'Modify Ticket'})",
            "fill({textbox 'Keywords:'}, 'security mobile')",
            "click({button 'Submit changes'})",
        ),
        check=DataCheck(
            "select keywords from ticket where id = 28", ({"keywords": "security mobile"},)
        ),
    ),
    WebTask(
        name="trac-edit-wiki",
        instruction="Add the rule 'Keep functions under 50 lines.' to the CodingStyle wiki page.",
        site="trac",
        category="edit",
        start_path="/wiki/CodingStyle",
        steps=(
            "click({button 'Edit this page'})",
            # the editor's text area is focused when it opens (see the module docstring); the
            # page ends with a newline, so the new rule goes on a line of its own
            "keyboard_press('ControlOrMeta+End')",
            "keyboard_type(' * Keep functions under 50 lines.')",
            "fill({textbox 'Comment about this change (optional):'}, 'Add a rule')",
            "click({button 'Submit changes'})",
        ),
        check=DataCheck(
            "select version, comment from wiki where name = 'CodingStyle' "
            "and text like '%Keep functions under 50 lines.%'",
            ({"version": 2, "comment": "Add a rule"},),
        ),
    ),
    # --- search ---------------------------------------------------------------------------------
    WebTask(
        name="trac-search-tickets",
        instruction="Search the tracker for tickets about the thumbnail cache.",
        site="trac",
        category="search",
        start_path="/",
        steps=(
            "click({link 'SEARCH'})",
            "fill({textbox 'Search'}, 'thumbnail cache')",
            "keyboard_press('Enter')",
            "noop(500)",  # the results page loads after Enter returned (module docstring)
        ),
        check=PageCheck(
            url_contains="/search?q=thumbnail", text_contains="Thumbnail cache grows without bound"
        ),
    ),
    WebTask(
        name="trac-search-wiki-only",
        instruction="Search only the wiki for pages that mention backups.",
        site="trac",
        category="search",
        start_path="/search",
        steps=(
            "click({checkbox 'Tickets'})",
            "click({checkbox 'Milestones'})",
            "fill({textbox 'Search'}, 'backup')",
            "keyboard_press('Enter')",
            "noop(500)",  # the results page loads after Enter returned (module docstring)
        ),
        check=PageCheck(url_contains="wiki=on", text_contains="BackupAndRestore"),
    ),
    # --- navigation -----------------------------------------------------------------------------
    WebTask(
        name="trac-navigate-milestone",
        instruction="Open the roadmap and go to the page of milestone 1.1.",
        site="trac",
        category="navigation",
        start_path="/",
        steps=("click({link 'ROADMAP'})", "click({link 'Milestone: 1.1'})"),
        check=PageCheck(
            url_contains="/milestone/1.1", text_contains="Search improvements and the REST API"
        ),
    ),
    WebTask(
        name="trac-navigate-active-tickets",
        instruction="Show the report of all active tickets.",
        site="trac",
        category="navigation",
        start_path="/",
        steps=("click({link 'VIEW TICKETS'})", "click({link '{1} Active Tickets'})"),
        check=PageCheck(url_contains="/report/1", text_contains="Search results ignore album"),
    ),
    WebTask(
        name="trac-navigate-wiki-page",
        instruction="From the wiki's start page, open the backup and restore instructions.",
        site="trac",
        category="navigation",
        start_path="/",
        steps=("click({link 'WIKI'})", "click({link 'Backup and restore'})"),
        check=PageCheck(url_contains="/wiki/BackupAndRestore", text_contains="skylark migrate"),
    ),
)
"""Trac tasks: tickets created, commented, resolved, re-prioritised; wiki pages written."""
