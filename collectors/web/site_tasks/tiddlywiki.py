"""Scripted tasks on the tiddlywiki site: TiddlyWiki 5.3, the "Maple Street Notebook".

TiddlyWiki is a single page: opening a tiddler, searching and editing change the page without
a navigation, and the address stays the same, so read-only tasks are checked by what the page
shows. Edits reach the disk about a second after "Confirm changes" (the environment's data
check waits for them). What the editor looks like to the browser:

* the title box is the editor's only unnamed text box (``textbox ''``), focused when a new
  tiddler opens; the body is ``textbox 'Type the text for this tiddler'`` inside an iframe;
* tags are typed into ``textbox 'tag name'`` and added with the first ``button 'add'``;
* a new field is typed into ``textbox 'field name'`` then ``textbox 'field value'`` and
  added with Enter (its "add" button has the same name as the tag one); adding a field that
  exists sets its value, which is how the scripts change one (the existing fields' value
  boxes are also named 'field value' and come first; the new field's box is the last,
  ``{textbox 'field value' #-1}``).
"""

from __future__ import annotations

from worldtrace.collectors.web.tasks import DataCheck, PageCheck, WebTask

TEXT = "{textbox 'Type the text for this tiddler'}"
"""The body of the tiddler being edited."""

TASKS: tuple[WebTask, ...] = (
    # --- create -------------------------------------------------------------------------------
    WebTask(
        name="tiddlywiki-create-recipe",
        instruction="Add a recipe tiddler 'Pancakes' tagged Recipe with its ingredients.",
        site="tiddlywiki",
        category="create",
        steps=(
            "click({button 'new tiddler'})",
            "fill({textbox ''}, 'Pancakes')",
            "fill({textbox 'tag name'}, 'Recipe')",
            "click({button 'add'})",
            f"fill({TEXT}, '* 125 g flour\\n* 2 eggs\\n* 300 ml milk')",
            "click({button 'Confirm changes to this tiddler'})",
        ),
        check=DataCheck(
            "[[Pancakes]]",
            (
                {
                    "title": "Pancakes",
                    "tags": "Recipe",
                    "text": "* 125 g flour\n* 2 eggs\n* 300 ml milk",
                },
            ),
        ),
    ),
    WebTask(
        name="tiddlywiki-create-note",
        instruction="Write a note 'Plumber Visit' tagged Notes saying the plumber comes Friday.",
        site="tiddlywiki",
        category="create",
        steps=(
            "click({button 'new tiddler'})",
            "fill({textbox ''}, 'Plumber Visit')",
            f"fill({TEXT}, 'The plumber comes on Friday at 9.')",
            "fill({textbox 'tag name'}, 'Notes')",
            "keyboard_press('Enter')",
            "click({button 'Confirm changes to this tiddler'})",
        ),
        check=DataCheck(
            "[tag[Notes]]",
            ({"title": "Plumber Visit", "text": "The plumber comes on Friday at 9."},),
        ),
    ),
    WebTask(
        name="tiddlywiki-create-task-with-due-date",
        instruction="Add a household task 'Clear Out Shed' for Sam, due 2024-07-10.",
        site="tiddlywiki",
        category="create",
        steps=(
            "click({button 'new tiddler'})",
            "fill({textbox ''}, 'Clear Out Shed')",
            "fill({textbox 'tag name'}, 'Task')",
            "click({button 'add'})",
            f"fill({TEXT}, 'Take the old paint tins to the tip.')",
            "fill({textbox 'field name'}, 'due')",
            "fill({textbox 'field value' #-1}, '2024-07-10')",
            "keyboard_press('Enter')",
            "fill({textbox 'field name'}, 'assignee')",
            "fill({textbox 'field value' #-1}, 'Sam')",
            "keyboard_press('Enter')",
            "click({button 'Confirm changes to this tiddler'})",
        ),
        check=DataCheck(
            "[[Clear Out Shed]]",
            ({"tags": "Task", "due": "2024-07-10", "assignee": "Sam"},),
        ),
    ),
    # --- form -----------------------------------------------------------------------------------
    WebTask(
        name="tiddlywiki-form-plant",
        instruction="Record the courgettes sown in Bed 3 as a Plant tiddler with its bed field.",
        site="tiddlywiki",
        category="form",
        steps=(
            "click({button 'new tiddler'})",
            "fill({textbox ''}, 'Courgettes')",
            "fill({textbox 'tag name'}, 'Plant')",
            "click({button 'add'})",
            "fill({textbox 'field name'}, 'bed')",
            "fill({textbox 'field value' #-1}, 'Bed 3')",
            "keyboard_press('Enter')",
            f"fill({TEXT}, 'Two plants; pick small and often.')",
            "click({button 'Confirm changes to this tiddler'})",
        ),
        check=DataCheck("[tag[Plant]field:bed[Bed 3]]", ({"title": "Courgettes"},)),
    ),
    # --- edit -----------------------------------------------------------------------------------
    WebTask(
        name="tiddlywiki-edit-shopping-list",
        instruction="Add flour to the shopping list.",
        site="tiddlywiki",
        category="edit",
        start_path="/#Shopping%20List",
        steps=(
            "click({button 'Edit this tiddler'})",
            f"click({TEXT})",
            # the list ends with a newline: the new item goes on the line after it
            "keyboard_press('ControlOrMeta+End')",
            "keyboard_type('* flour')",
            "click({button 'Confirm changes to this tiddler'})",
        ),
        check=DataCheck(
            "[[Shopping List]]",
            (
                {
                    "text": "* red lentils\n* coconut milk\n* spaghetti\n* eggs (12)\n* feta\n"
                    "* bananas\n* oats\n* flour"
                },
            ),
        ),
    ),
    WebTask(
        name="tiddlywiki-mark-task-done",
        instruction="Mark the task 'Clean Gutters' as done.",
        site="tiddlywiki",
        category="edit",
        start_path="/#Clean%20Gutters",
        steps=(
            "click({button 'Edit this tiddler'})",
            "fill({textbox 'tag name'}, 'Done')",
            "click({button 'add'})",
            "click({button 'Confirm changes to this tiddler'})",
        ),
        check=DataCheck("[tag[Done]]", ({"title": "Clean Gutters", "tags": "Task Done"},)),
    ),
    WebTask(
        name="tiddlywiki-reassign-task",
        instruction="Reassign the boiler service task to Sam.",
        site="tiddlywiki",
        category="edit",
        start_path="/#Service%20Boiler",
        steps=(
            "click({button 'Edit this tiddler'})",
            # Adding a field that exists replaces its value; the new field's value box is the
            # last of the boxes named 'field value'.
            "fill({textbox 'field name'}, 'assignee')",
            "fill({textbox 'field value' #-1}, 'Sam')",
            "keyboard_press('Enter')",
            "click({button 'Confirm changes to this tiddler'})",
        ),
        check=DataCheck("[[Service Boiler]]", ({"assignee": "Sam", "due": "2024-05-31"},)),
    ),
    WebTask(
        name="tiddlywiki-delete-tiddler",
        instruction="Delete the finished task 'Renew Car Insurance'.",
        site="tiddlywiki",
        category="edit",
        start_path="/#Renew%20Car%20Insurance",
        steps=(
            "click({button 'Edit this tiddler'})",
            # TiddlyWiki asks for confirmation in a dialog, which the environment accepts
            "click({button 'Delete this tiddler'})",
        ),
        check=DataCheck("[[Renew Car Insurance]]", ()),
    ),
    # --- search ---------------------------------------------------------------------------------
    WebTask(
        name="tiddlywiki-search-ladder",
        instruction="Find where the notebook mentions borrowing a ladder.",
        site="tiddlywiki",
        category="search",
        steps=("fill({searchbox ''}, 'ladder')",),
        # the sidebar lists matching tiddlers as you type; none of them is open at the start
        check=PageCheck(text_contains="Clean Gutters"),
    ),
    WebTask(
        name="tiddlywiki-search-open-result",
        instruction="Search for the boiler and open the tiddler about its service.",
        site="tiddlywiki",
        category="search",
        steps=("fill({searchbox ''}, 'boiler')", "click({link 'Service Boiler'})"),
        check=PageCheck(text_contains="ref HB-2291"),
    ),
    # --- navigation -----------------------------------------------------------------------------
    WebTask(
        name="tiddlywiki-open-recipe",
        instruction="Open Monday's dinner recipe from the weekly meal plan.",
        site="tiddlywiki",
        category="navigation",
        steps=("click({link 'Lentil Soup'})",),
        check=PageCheck(text_contains="250 g red lentils"),
    ),
    WebTask(
        name="tiddlywiki-navigate-garden",
        instruction="Go to the garden section and read how to look after the basil.",
        site="tiddlywiki",
        category="navigation",
        steps=("click({link 'Garden'})", "click({link 'Basil'})"),
        check=PageCheck(text_contains="sunny windowsill"),
    ),
    WebTask(
        name="tiddlywiki-navigate-tasks",
        instruction="Open the household tasks and look up the fence repainting job.",
        site="tiddlywiki",
        category="navigation",
        steps=("click({link 'Household Tasks'})", "click({link 'Repaint Fence'})"),
        check=PageCheck(text_contains="sage-green wood stain"),
    ),
)
"""TiddlyWiki tasks: tiddlers created, tagged, edited and deleted; the notebook searched."""
