"""Scripted tasks on the datasette site: Datasette 0.65 over the Riverside Public Library.

Datasette writes only through the database's two writable canned queries, so the tasks that
change data are ``add_review`` (a new row in ``reviews``; the seeded ones are 1-240) and
``return_loan`` (``loans.returned_on`` of one loan). Loans 304 and 420 are out and overdue in
the seeded data; book 35 is Moby-Dick, 12 Frankenstein, 59 Dracula.

A table page's search box and column filter share one form with the "Apply" button, so the
scripts submit with that button: pressing Enter starts the navigation after the key press
has returned, and the next observation may still show the old page.
"""

from __future__ import annotations

from worldtrace.collectors.web.tasks import DataCheck, PageCheck, WebTask

TASKS: tuple[WebTask, ...] = (
    # --- create -------------------------------------------------------------------------------
    WebTask(
        name="datasette-add-review",
        instruction=(
            "Add a 5-star review of Moby-Dick (book 35) by Ishmael Reader: 'A whale of a tale.'"
        ),
        site="datasette",
        category="create",
        start_path="/library",
        steps=(
            "click({link 'Add a review'})",
            "fill({textbox 'book_id'}, '35')",
            "fill({textbox 'reviewer'}, 'Ishmael Reader')",
            "fill({textbox 'rating'}, '5')",
            "fill({textbox 'body'}, 'A whale of a tale.')",
            "click({button 'Run SQL'})",
        ),
        check=DataCheck(
            "select book_id, rating, body, created from reviews where reviewer = 'Ishmael Reader'",
            ({"book_id": 35, "rating": 5, "body": "A whale of a tale.", "created": "2024-07-01"},),
        ),
    ),
    WebTask(
        name="datasette-add-review-found-book",
        instruction=(
            "Find Frankenstein in the catalogue and add a 4-star review of it by Victor Reader."
        ),
        site="datasette",
        category="create",
        start_path="/library/books",
        steps=(
            "fill({searchbox 'Search:'}, 'Frankenstein')",
            "click({button 'Apply'})",
            # the search result shows the book's id (12) in its row
            "goto('{site}/library/add_review')",
            "fill({textbox 'book_id'}, '12')",
            "fill({textbox 'reviewer'}, 'Victor Reader')",
            "fill({textbox 'rating'}, '4')",
            "fill({textbox 'body'}, 'Still chilling two centuries later.')",
            "click({button 'Run SQL'})",
        ),
        check=DataCheck(
            "select b.title, r.rating from reviews r join books b on b.id = r.book_id "
            "where r.reviewer = 'Victor Reader'",
            ({"title": "Frankenstein", "rating": 4},),
        ),
    ),
    # --- form -----------------------------------------------------------------------------------
    WebTask(
        name="datasette-form-low-rating-review",
        instruction="Submit a 2-star review of Dracula (book 59) from Mina Harker saying it drags.",
        site="datasette",
        category="form",
        start_path="/library/add_review",
        steps=(
            "fill({textbox 'book_id'}, '59')",
            "fill({textbox 'reviewer'}, 'Mina Harker')",
            "fill({textbox 'rating'}, '2')",
            "fill({textbox 'body'}, 'The middle drags.')",
            "click({button 'Run SQL'})",
        ),
        check=DataCheck(
            "select book_id, rating from reviews where reviewer = 'Mina Harker' "
            "and body = 'The middle drags.'",
            ({"book_id": 59, "rating": 2},),
        ),
    ),
    WebTask(
        name="datasette-form-sql-open-loans",
        instruction="Use a SQL query to count the loans that have not been returned.",
        site="datasette",
        category="form",
        start_path="/library",
        steps=(
            # The SQL editor (CodeMirror) is the page's only unnamed text box. It starts with a
            # sample query that fill() types in front of instead of replacing, so fill() only
            # focuses it; selecting everything and typing replaces the sample.
            "fill({textbox ''}, ' ')",
            "keyboard_press('ControlOrMeta+a')",
            "keyboard_type(\"select 'open: ' || count(*) as answer from loans "
            'where returned_on is null")',
            "click({button 'Run SQL'})",
        ),
        # the editor echoes the query, never its result, so the result text proves it ran
        check=PageCheck(url_contains="sql=", text_contains="open: 127"),
    ),
    # --- edit -----------------------------------------------------------------------------------
    WebTask(
        name="datasette-return-loan",
        instruction="Mark loan 304 as returned on 2024-07-01.",
        site="datasette",
        category="edit",
        start_path="/library",
        steps=(
            "click({link 'Return a loan'})",
            "fill({textbox 'returned_on'}, '2024-07-01')",
            "fill({textbox 'loan_id'}, '304')",
            "click({button 'Run SQL'})",
        ),
        check=DataCheck(
            "select returned_on from loans where id = 304", ({"returned_on": "2024-07-01"},)
        ),
    ),
    WebTask(
        name="datasette-return-overdue-loan",
        instruction=(
            "Check the overdue loans, then record that loan 420 (The Age of Innocence) came "
            "back on 2024-07-02."
        ),
        site="datasette",
        category="edit",
        start_path="/library",
        steps=(
            "click({link 'Overdue loans'})",
            "go_back()",
            "click({link 'Return a loan'})",
            "fill({textbox 'returned_on'}, '2024-07-02')",
            "fill({textbox 'loan_id'}, '420')",
            "click({button 'Run SQL'})",
        ),
        check=DataCheck(
            "select id from loans where returned_on = '2024-07-02' and id = 420", ({"id": 420},)
        ),
    ),
    # --- search ---------------------------------------------------------------------------------
    WebTask(
        name="datasette-search-books",
        instruction="Search the book catalogue for 'whale'.",
        site="datasette",
        category="search",
        start_path="/library/books",
        steps=("fill({searchbox 'Search:'}, 'whale')", "click({button 'Apply'})"),
        check=PageCheck(url_contains="_search=whale", text_contains="Moby-Dick"),
    ),
    WebTask(
        name="datasette-search-reviews",
        instruction="Find the reviews that mention a book club.",
        site="datasette",
        category="search",
        start_path="/library",
        steps=(
            "click({link 'reviews'})",
            "fill({searchbox 'Search:'}, 'club')",
            "click({button 'Apply'})",
        ),
        check=PageCheck(url_contains="_search=club", text_contains="Our book club loved it."),
    ),
    WebTask(
        name="datasette-filter-year",
        instruction="List the books published in 1925.",
        site="datasette",
        category="search",
        start_path="/library/books",
        steps=(
            # the column list comes before the operator list (left at '='); both are unnamed
            "select_option({combobox ''}, 'year')",
            "fill({textbox ''}, '1925')",
            "click({button 'Apply'})",
        ),
        check=PageCheck(url_contains="year__exact=1925", text_contains="The Great Gatsby"),
    ),
    # --- navigation -----------------------------------------------------------------------------
    WebTask(
        name="datasette-facet-genre",
        instruction="Show only the mystery books.",
        site="datasette",
        category="navigation",
        start_path="/library/books",
        steps=("click({link 'Mystery'})",),
        check=PageCheck(
            url_contains="genre=Mystery", text_contains="The Hound of the Baskervilles"
        ),
    ),
    WebTask(
        name="datasette-sort-by-pages",
        instruction="Sort the books by their number of pages.",
        site="datasette",
        category="navigation",
        start_path="/library/books",
        steps=("click({link 'pages'})",),
        check=PageCheck(url_contains="_sort=pages", text_contains="sorted by pages"),
    ),
    WebTask(
        name="datasette-navigate-members",
        instruction="From the home page, open the library's members table.",
        site="datasette",
        category="navigation",
        start_path="/",
        steps=("click({link 'library'})", "click({link 'members'})"),
        check=PageCheck(url_contains="/library/members", text_contains="400 rows"),
    ),
    WebTask(
        name="datasette-navigate-overdue",
        instruction="Open the list of overdue loans.",
        site="datasette",
        category="navigation",
        start_path="/",
        steps=("click({link 'library'})", "click({link 'Overdue loans'})"),
        check=PageCheck(
            url_contains="/library/overdue_loans", text_contains="The Age of Innocence"
        ),
    ),
)
"""Datasette tasks: reviews added, loans returned, books searched, filtered and faceted."""
