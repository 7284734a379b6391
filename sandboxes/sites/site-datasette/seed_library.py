"""Create the Riverside Public Library database: branches, authors, books, members, loans.

Run once at image build time: ``seed_library.py <database path>``. The catalogue is real
(classic books and their authors); members, loans and reviews are generated from a fixed seed,
so every build produces the same rows. ``books`` and ``reviews`` get FTS5 indexes kept in
sync by triggers, which Datasette detects and offers as a search box.
"""

import datetime
import random
import sqlite3
import sys

BRANCHES = [
    (1, "Central Library", "Old Town", "1 Market Square", 1911, "555-0100"),
    (2, "Riverside Branch", "Riverside", "48 Quay Street", 1958, "555-0142"),
    (3, "Northgate Branch", "Northgate", "220 Hill Road", 1972, "555-0173"),
    (4, "Eastfield Branch", "Eastfield", "9 Orchard Lane", 1988, "555-0188"),
    (5, "Harbour Reading Room", "Harbour", "3 Pier Walk", 2004, "555-0104"),
    (6, "Westbrook Branch", "Westbrook", "71 Station Avenue", 2015, "555-0115"),
]

# (name, born, died, country)
AUTHORS = [
    ("Jane Austen", 1775, 1817, "United Kingdom"),
    ("Charles Dickens", 1812, 1870, "United Kingdom"),
    ("George Eliot", 1819, 1880, "United Kingdom"),
    ("Mary Shelley", 1797, 1851, "United Kingdom"),
    ("Charlotte Brontë", 1816, 1855, "United Kingdom"),
    ("Emily Brontë", 1818, 1848, "United Kingdom"),
    ("Thomas Hardy", 1840, 1928, "United Kingdom"),
    ("Virginia Woolf", 1882, 1941, "United Kingdom"),
    ("Leo Tolstoy", 1828, 1910, "Russia"),
    ("Fyodor Dostoevsky", 1821, 1881, "Russia"),
    ("Anton Chekhov", 1860, 1904, "Russia"),
    ("Gustave Flaubert", 1821, 1880, "France"),
    ("Victor Hugo", 1802, 1885, "France"),
    ("Alexandre Dumas", 1802, 1870, "France"),
    ("Jules Verne", 1828, 1905, "France"),
    ("Mark Twain", 1835, 1910, "United States"),
    ("Herman Melville", 1819, 1891, "United States"),
    ("Edith Wharton", 1862, 1937, "United States"),
    ("F. Scott Fitzgerald", 1896, 1940, "United States"),
    ("Franz Kafka", 1883, 1924, "Czech Republic"),
    ("Thomas Mann", 1875, 1955, "Germany"),
    ("Miguel de Cervantes", 1547, 1616, "Spain"),
    ("Arthur Conan Doyle", 1859, 1930, "United Kingdom"),
    ("H. G. Wells", 1866, 1946, "United Kingdom"),
    ("Joseph Conrad", 1857, 1924, "United Kingdom"),
    ("Oscar Wilde", 1854, 1900, "Ireland"),
    ("James Joyce", 1882, 1941, "Ireland"),
    ("Louisa May Alcott", 1832, 1888, "United States"),
    ("Lewis Carroll", 1832, 1898, "United Kingdom"),
    ("Bram Stoker", 1847, 1912, "Ireland"),
]

# (title, author, year, genre, pages, language, summary)
BOOKS = [
    (
        "Pride and Prejudice",
        "Jane Austen",
        1813,
        "Romance",
        432,
        "English",
        "Elizabeth Bennet and Mr Darcy overcome pride and first impressions.",
    ),
    (
        "Emma",
        "Jane Austen",
        1815,
        "Romance",
        474,
        "English",
        "A young matchmaker in Highbury misjudges everyone, herself included.",
    ),
    (
        "Sense and Sensibility",
        "Jane Austen",
        1811,
        "Romance",
        409,
        "English",
        "Two sisters, one prudent and one passionate, face love and loss.",
    ),
    (
        "Persuasion",
        "Jane Austen",
        1817,
        "Romance",
        249,
        "English",
        "Anne Elliot meets again the naval captain she was persuaded to refuse.",
    ),
    (
        "Great Expectations",
        "Charles Dickens",
        1861,
        "Literary fiction",
        544,
        "English",
        "The orphan Pip rises in society thanks to a mysterious benefactor.",
    ),
    (
        "A Tale of Two Cities",
        "Charles Dickens",
        1859,
        "Historical fiction",
        489,
        "English",
        "London and Paris before and during the French Revolution.",
    ),
    (
        "Oliver Twist",
        "Charles Dickens",
        1838,
        "Literary fiction",
        608,
        "English",
        "An orphan falls in with a gang of pickpockets in London.",
    ),
    (
        "Bleak House",
        "Charles Dickens",
        1853,
        "Literary fiction",
        1017,
        "English",
        "An endless Chancery lawsuit entangles many lives.",
    ),
    (
        "David Copperfield",
        "Charles Dickens",
        1850,
        "Literary fiction",
        882,
        "English",
        "A life from a hard childhood to success as a novelist.",
    ),
    (
        "Middlemarch",
        "George Eliot",
        1871,
        "Literary fiction",
        880,
        "English",
        "The lives and marriages of a provincial English town.",
    ),
    (
        "Silas Marner",
        "George Eliot",
        1861,
        "Literary fiction",
        256,
        "English",
        "A miserly weaver is redeemed by a foundling child.",
    ),
    (
        "Frankenstein",
        "Mary Shelley",
        1818,
        "Science fiction",
        280,
        "English",
        "A scientist creates a living being and is destroyed by his creation.",
    ),
    (
        "Jane Eyre",
        "Charlotte Brontë",
        1847,
        "Romance",
        532,
        "English",
        "An orphaned governess and the secret of Thornfield Hall.",
    ),
    (
        "Wuthering Heights",
        "Emily Brontë",
        1847,
        "Literary fiction",
        416,
        "English",
        "Heathcliff's love and revenge on the Yorkshire moors.",
    ),
    (
        "Tess of the d'Urbervilles",
        "Thomas Hardy",
        1891,
        "Literary fiction",
        518,
        "English",
        "A poor country girl's tragic fate in Wessex.",
    ),
    (
        "Far from the Madding Crowd",
        "Thomas Hardy",
        1874,
        "Romance",
        464,
        "English",
        "Bathsheba Everdene and her three suitors.",
    ),
    (
        "Mrs Dalloway",
        "Virginia Woolf",
        1925,
        "Literary fiction",
        194,
        "English",
        "One June day in London as Clarissa Dalloway prepares a party.",
    ),
    (
        "To the Lighthouse",
        "Virginia Woolf",
        1927,
        "Literary fiction",
        209,
        "English",
        "The Ramsay family's summers on the Isle of Skye.",
    ),
    (
        "War and Peace",
        "Leo Tolstoy",
        1869,
        "Historical fiction",
        1225,
        "Russian",
        "Five aristocratic families through the Napoleonic wars.",
    ),
    (
        "Anna Karenina",
        "Leo Tolstoy",
        1878,
        "Literary fiction",
        864,
        "Russian",
        "A married woman's affair with Count Vronsky and its consequences.",
    ),
    (
        "Crime and Punishment",
        "Fyodor Dostoevsky",
        1866,
        "Literary fiction",
        671,
        "Russian",
        "A poor student commits a murder and struggles with guilt.",
    ),
    (
        "The Brothers Karamazov",
        "Fyodor Dostoevsky",
        1880,
        "Literary fiction",
        796,
        "Russian",
        "Three brothers, their father's murder, faith and doubt.",
    ),
    (
        "The Idiot",
        "Fyodor Dostoevsky",
        1869,
        "Literary fiction",
        656,
        "Russian",
        "The good-hearted Prince Myshkin in St Petersburg society.",
    ),
    (
        "The Cherry Orchard",
        "Anton Chekhov",
        1904,
        "Drama",
        96,
        "Russian",
        "An aristocratic family loses its estate and orchard.",
    ),
    (
        "Madame Bovary",
        "Gustave Flaubert",
        1857,
        "Literary fiction",
        329,
        "French",
        "A doctor's wife seeks escape from provincial boredom.",
    ),
    (
        "Les Misérables",
        "Victor Hugo",
        1862,
        "Historical fiction",
        1463,
        "French",
        "The ex-convict Jean Valjean pursued by Inspector Javert.",
    ),
    (
        "The Hunchback of Notre-Dame",
        "Victor Hugo",
        1831,
        "Historical fiction",
        510,
        "French",
        "Quasimodo, Esmeralda and the cathedral of Paris.",
    ),
    (
        "The Count of Monte Cristo",
        "Alexandre Dumas",
        1844,
        "Adventure",
        1276,
        "French",
        "A wrongly imprisoned sailor escapes and takes revenge.",
    ),
    (
        "The Three Musketeers",
        "Alexandre Dumas",
        1844,
        "Adventure",
        625,
        "French",
        "D'Artagnan joins Athos, Porthos and Aramis.",
    ),
    (
        "Twenty Thousand Leagues Under the Seas",
        "Jules Verne",
        1870,
        "Science fiction",
        426,
        "French",
        "Captain Nemo's submarine Nautilus explores the oceans.",
    ),
    (
        "Around the World in Eighty Days",
        "Jules Verne",
        1872,
        "Adventure",
        256,
        "French",
        "Phileas Fogg wagers he can circle the globe in eighty days.",
    ),
    (
        "Journey to the Center of the Earth",
        "Jules Verne",
        1864,
        "Science fiction",
        240,
        "French",
        "A professor descends an Icelandic volcano.",
    ),
    (
        "Adventures of Huckleberry Finn",
        "Mark Twain",
        1884,
        "Adventure",
        366,
        "English",
        "Huck and Jim raft down the Mississippi.",
    ),
    (
        "The Adventures of Tom Sawyer",
        "Mark Twain",
        1876,
        "Adventure",
        274,
        "English",
        "A boy's adventures in a town on the Mississippi.",
    ),
    (
        "Moby-Dick",
        "Herman Melville",
        1851,
        "Adventure",
        635,
        "English",
        "Captain Ahab hunts the white whale.",
    ),
    (
        "The Age of Innocence",
        "Edith Wharton",
        1920,
        "Literary fiction",
        365,
        "English",
        "New York high society in the 1870s.",
    ),
    (
        "The House of Mirth",
        "Edith Wharton",
        1905,
        "Literary fiction",
        329,
        "English",
        "Lily Bart's search for a husband in New York society.",
    ),
    (
        "The Great Gatsby",
        "F. Scott Fitzgerald",
        1925,
        "Literary fiction",
        180,
        "English",
        "Jay Gatsby's pursuit of Daisy Buchanan on Long Island.",
    ),
    (
        "The Trial",
        "Franz Kafka",
        1925,
        "Literary fiction",
        255,
        "German",
        "Josef K. is arrested for a crime never named.",
    ),
    (
        "The Metamorphosis",
        "Franz Kafka",
        1915,
        "Literary fiction",
        70,
        "German",
        "Gregor Samsa wakes up transformed into an insect.",
    ),
    (
        "The Magic Mountain",
        "Thomas Mann",
        1924,
        "Literary fiction",
        720,
        "German",
        "Seven years in a Swiss sanatorium before the Great War.",
    ),
    (
        "Buddenbrooks",
        "Thomas Mann",
        1901,
        "Literary fiction",
        731,
        "German",
        "The decline of a Lübeck merchant family.",
    ),
    (
        "Don Quixote",
        "Miguel de Cervantes",
        1605,
        "Adventure",
        1072,
        "Spanish",
        "A gentleman who read too many romances becomes a knight errant.",
    ),
    (
        "A Study in Scarlet",
        "Arthur Conan Doyle",
        1887,
        "Mystery",
        108,
        "English",
        "Sherlock Holmes and Dr Watson meet and solve their first case.",
    ),
    (
        "The Hound of the Baskervilles",
        "Arthur Conan Doyle",
        1902,
        "Mystery",
        256,
        "English",
        "A spectral hound haunts the Baskerville family on Dartmoor.",
    ),
    (
        "The Sign of the Four",
        "Arthur Conan Doyle",
        1890,
        "Mystery",
        144,
        "English",
        "A stolen treasure from India and a pact of four convicts.",
    ),
    (
        "The Time Machine",
        "H. G. Wells",
        1895,
        "Science fiction",
        118,
        "English",
        "A traveller visits the distant future of the Eloi and Morlocks.",
    ),
    (
        "The War of the Worlds",
        "H. G. Wells",
        1898,
        "Science fiction",
        192,
        "English",
        "Martians invade southern England.",
    ),
    (
        "The Invisible Man",
        "H. G. Wells",
        1897,
        "Science fiction",
        160,
        "English",
        "A scientist makes himself invisible and loses his mind.",
    ),
    (
        "Heart of Darkness",
        "Joseph Conrad",
        1899,
        "Literary fiction",
        96,
        "English",
        "Marlow travels up the Congo River in search of Kurtz.",
    ),
    (
        "Lord Jim",
        "Joseph Conrad",
        1900,
        "Adventure",
        418,
        "English",
        "A young officer's act of cowardice and his search for redemption.",
    ),
    (
        "The Picture of Dorian Gray",
        "Oscar Wilde",
        1890,
        "Literary fiction",
        254,
        "English",
        "A portrait ages while its subject stays young.",
    ),
    (
        "The Importance of Being Earnest",
        "Oscar Wilde",
        1895,
        "Drama",
        76,
        "English",
        "A comedy of double lives and a handbag at Victoria station.",
    ),
    (
        "Dubliners",
        "James Joyce",
        1914,
        "Short stories",
        152,
        "English",
        "Fifteen stories of middle-class life in Dublin.",
    ),
    (
        "Ulysses",
        "James Joyce",
        1922,
        "Literary fiction",
        730,
        "English",
        "One day, 16 June 1904, in the life of Leopold Bloom.",
    ),
    (
        "Little Women",
        "Louisa May Alcott",
        1868,
        "Literary fiction",
        759,
        "English",
        "The four March sisters grow up during the Civil War.",
    ),
    (
        "Alice's Adventures in Wonderland",
        "Lewis Carroll",
        1865,
        "Children",
        192,
        "English",
        "Alice follows a white rabbit down a rabbit hole.",
    ),
    (
        "Through the Looking-Glass",
        "Lewis Carroll",
        1871,
        "Children",
        208,
        "English",
        "Alice steps through a mirror into a world of chess.",
    ),
    (
        "Dracula",
        "Bram Stoker",
        1897,
        "Horror",
        418,
        "English",
        "Count Dracula moves from Transylvania to England.",
    ),
    (
        "Northanger Abbey",
        "Jane Austen",
        1817,
        "Romance",
        251,
        "English",
        "Catherine Morland, an avid reader of Gothic novels, visits Northanger Abbey.",
    ),
]

FIRST = [
    "Amelia",
    "Ben",
    "Chloe",
    "Daniel",
    "Elif",
    "Farah",
    "George",
    "Hana",
    "Isaac",
    "Jonas",
    "Keiko",
    "Liam",
    "Maya",
    "Noah",
    "Olivia",
    "Pavel",
    "Quinn",
    "Rosa",
    "Samir",
    "Tara",
    "Umar",
    "Vera",
    "William",
    "Ximena",
    "Yusuf",
    "Zoe",
]
LAST = [
    "Adams",
    "Bakker",
    "Chen",
    "Diallo",
    "Evans",
    "Fischer",
    "Garcia",
    "Hughes",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Lopez",
    "Murphy",
    "Nakamura",
    "O'Brien",
    "Patel",
    "Rossi",
    "Schmidt",
    "Thompson",
    "Usman",
    "Varga",
    "Walsh",
    "Young",
    "Zhang",
]
REVIEW_PHRASES = [
    "Couldn't put it down.",
    "Slow start but worth it.",
    "A classic for a reason.",
    "Too long for my taste.",
    "Beautifully written.",
    "Our book club loved it.",
    "The ending surprised me.",
    "Great for a long train journey.",
    "Hard going in places.",
    "Read it again after twenty years and liked it even more.",
]

SCHEMA = """
create table branches (id integer primary key, name text not null, neighborhood text,
    address text, opened_year integer, phone text);
create table authors (id integer primary key, name text not null, born integer, died integer,
    country text);
create table books (id integer primary key, title text not null,
    author_id integer references authors(id), year integer, genre text, pages integer,
    language text, isbn text, summary text);
create table members (id integer primary key, name text not null,
    home_branch_id integer references branches(id), joined text, membership text);
create table loans (id integer primary key, book_id integer not null references books(id),
    member_id integer not null references members(id),
    branch_id integer not null references branches(id),
    loaned_on text not null, due_on text not null, returned_on text);
create table reviews (id integer primary key, book_id integer not null references books(id),
    reviewer text not null, rating integer check (rating between 1 and 5), body text,
    created text);
create index loans_book on loans(book_id);
create index loans_member on loans(member_id);
create index reviews_book on reviews(book_id);
"""


def fts(db: sqlite3.Connection, table: str, columns: list[str]) -> None:
    """Index ``columns`` of ``table`` in an external-content FTS5 table kept in sync by triggers."""
    cols = ", ".join(columns)
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    db.executescript(f"""
        create virtual table {table}_fts using fts5({cols}, content="{table}", content_rowid="id");
        insert into {table}_fts (rowid, {cols}) select id, {cols} from {table};
        create trigger {table}_ai after insert on {table} begin
            insert into {table}_fts (rowid, {cols}) values (new.id, {new}); end;
        create trigger {table}_ad after delete on {table} begin
            insert into {table}_fts ({table}_fts, rowid, {cols}) values ('delete', old.id, {old});
        end;
        create trigger {table}_au after update on {table} begin
            insert into {table}_fts ({table}_fts, rowid, {cols}) values ('delete', old.id, {old});
            insert into {table}_fts (rowid, {cols}) values (new.id, {new}); end;
    """)


def isbn13(number: int) -> str:
    """A syntactically valid ISBN-13 (with check digit) derived from ``number``."""
    body = f"978{number:09d}"
    check = (10 - sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(body)) % 10) % 10
    return body + str(check)


def main(path: str) -> None:
    """Write the database to ``path``."""
    rng = random.Random(20240101)
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.executemany("insert into branches values (?, ?, ?, ?, ?, ?)", BRANCHES)
    author_ids = {}
    for index, (name, born, died, country) in enumerate(AUTHORS, start=1):
        db.execute("insert into authors values (?, ?, ?, ?, ?)", (index, name, born, died, country))
        author_ids[name] = index
    for index, (title, author, year, genre, pages, language, summary) in enumerate(BOOKS, 1):
        db.execute(
            "insert into books values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                index,
                title,
                author_ids[author],
                year,
                genre,
                pages,
                language,
                isbn13(140000000 + index * 7919),
                summary,
            ),
        )
    members = []
    for index in range(1, 401):
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        joined = datetime.date(2015, 1, 1) + datetime.timedelta(days=rng.randrange(3400))
        membership = rng.choices(["adult", "student", "senior", "child"], [6, 2, 2, 1])[0]
        members.append((index, name, rng.randint(1, len(BRANCHES)), joined.isoformat(), membership))
    db.executemany("insert into members values (?, ?, ?, ?, ?)", members)
    start = datetime.date(2023, 7, 1)
    for index in range(1, 3001):
        member = rng.choice(members)
        branch = member[2] if rng.random() < 0.8 else rng.randint(1, len(BRANCHES))
        loaned = start + datetime.timedelta(days=rng.randrange(365))
        due = loaned + datetime.timedelta(days=21)
        returned = None
        if loaned < datetime.date(2024, 6, 1) or rng.random() < 0.5:
            returned = (loaned + datetime.timedelta(days=rng.randint(3, 30))).isoformat()
        db.execute(
            "insert into loans values (?, ?, ?, ?, ?, ?, ?)",
            (
                index,
                rng.randint(1, len(BOOKS)),
                member[0],
                branch,
                loaned.isoformat(),
                due.isoformat(),
                returned,
            ),
        )
    for index in range(1, 241):
        rating = rng.choices([1, 2, 3, 4, 5], [1, 2, 4, 6, 5])[0]
        body = " ".join(rng.sample(REVIEW_PHRASES, 2))
        day = datetime.date(2023, 9, 1) + datetime.timedelta(days=rng.randrange(300))
        db.execute(
            "insert into reviews values (?, ?, ?, ?, ?, ?)",
            (
                index,
                rng.randint(1, len(BOOKS)),
                rng.choice(members)[1],
                rating,
                body,
                day.isoformat(),
            ),
        )
    fts(db, "books", ["title", "summary"])
    fts(db, "reviews", ["body"])
    db.commit()
    db.execute("vacuum")
    db.close()
    print(f"seeded {len(BOOKS)} books, {len(members)} members, 3000 loans into {path}")


if __name__ == "__main__":
    main(sys.argv[1])
