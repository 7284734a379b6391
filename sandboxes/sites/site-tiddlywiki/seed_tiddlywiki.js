// Seed a TiddlyWiki folder with a household notebook: recipes, garden plants, tasks, notes.
// Deterministic: fixed timestamps and a fixed tiddler list; run once at image build time.
// Usage: node seed_tiddlywiki.js <wiki>/tiddlers
"use strict";
const fs = require("fs");
const path = require("path");

const dir = process.argv[2];
if (!dir) {
  console.error("usage: seed_tiddlywiki.js <tiddlers folder>");
  process.exit(2);
}
fs.mkdirSync(dir, { recursive: true });

// TiddlyWiki dates are UTC "YYYYMMDDhhmmssSSS"; day n counts from 2024-03-01 09:00.
function stamp(day, minutes) {
  const date = new Date(Date.UTC(2024, 2, 1, 9, 0, 0) + (day * 24 * 60 + (minutes || 0)) * 60000);
  const pad = (n, w) => String(n).padStart(w || 2, "0");
  return (
    date.getUTCFullYear() + pad(date.getUTCMonth() + 1) + pad(date.getUTCDate()) +
    pad(date.getUTCHours()) + pad(date.getUTCMinutes()) + pad(date.getUTCSeconds()) + "000"
  );
}

const tiddlers = [
  { title: "$:/SiteTitle", text: "Maple Street Notebook" },
  { title: "$:/SiteSubtitle", text: "Recipes, garden notes and household tasks" },
  { title: "$:/DefaultTiddlers", text: "[[Welcome]] [[Weekly Meal Plan]]" },
  { title: "Welcome", tags: "Start", day: 0, text:
    "This notebook keeps the household running: what we cook, what grows in the garden and " +
    "what needs doing around the house.\n\n" +
    "!! Sections\n* [[Recipes]] – everything tagged <<tag Recipe>>\n" +
    "* [[Garden]] – plants tagged <<tag Plant>>\n* [[Household Tasks]] – open jobs tagged <<tag Task>>\n" +
    "* [[Contacts]]\n\nNew here? Start with the [[Weekly Meal Plan]]." },
  { title: "Recipes", tags: "Start", day: 1, text:
    "All recipes, newest first:\n\n<<list-links filter:\"[tag[Recipe]!sort[modified]]\">>" },
  { title: "Lentil Soup", tags: "Recipe Vegetarian Winter", day: 2, serves: "4", time: "45 min", text:
    "!! Ingredients\n* 250 g red lentils\n* 1 onion, 2 carrots, 2 celery sticks\n" +
    "* 2 cloves garlic\n* 1 tsp cumin, 1 tsp smoked paprika\n* 1.2 l vegetable stock\n* 1 lemon\n\n" +
    "!! Method\n# Soften the chopped onion, carrot and celery in olive oil for 10 minutes.\n" +
    "# Add garlic and spices, cook one minute.\n# Add lentils and stock; simmer 25 minutes.\n" +
    "# Blend half, season, finish with lemon juice." },
  { title: "Banana Bread", tags: "Recipe Baking", day: 3, serves: "10 slices", time: "1 h 15 min", text:
    "!! Ingredients\n* 3 very ripe bananas\n* 75 g melted butter\n* 150 g brown sugar\n* 1 egg\n" +
    "* 1 tsp baking soda, pinch of salt\n* 190 g flour\n\n!! Method\n" +
    "# Mash the bananas, stir in butter, sugar and egg.\n# Fold in the dry ingredients.\n" +
    "# Bake in a lined loaf tin at 175 °C for 55–60 minutes." },
  { title: "Shakshuka", tags: "Recipe Vegetarian Breakfast", day: 5, serves: "2", time: "30 min", text:
    "!! Ingredients\n* 1 tin chopped tomatoes\n* 1 red pepper\n* 1 onion\n* 4 eggs\n" +
    "* cumin, paprika, chilli flakes\n* feta and parsley to serve\n\n!! Method\n" +
    "# Fry onion and pepper until soft, add spices and tomatoes, simmer 10 minutes.\n" +
    "# Make four wells, crack in the eggs, cover and cook 6–8 minutes." },
  { title: "Chicken Curry", tags: "Recipe Dinner", day: 6, serves: "4", time: "50 min", text:
    "!! Ingredients\n* 600 g chicken thighs\n* 2 onions, 3 garlic cloves, thumb of ginger\n" +
    "* 2 tbsp curry paste\n* 400 ml coconut milk\n* spinach, coriander\n\n!! Method\n" +
    "# Brown the chicken, set aside.\n# Cook onion, garlic and ginger; add paste.\n" +
    "# Return chicken, add coconut milk, simmer 25 minutes; wilt in spinach." },
  { title: "Overnight Oats", tags: "Recipe Breakfast Vegetarian", day: 8, serves: "1", time: "5 min", text:
    "Mix 50 g oats, 120 ml milk, 2 tbsp yoghurt, 1 tsp chia seeds and a little honey in a jar. " +
    "Refrigerate overnight; top with berries." },
  { title: "Tomato Basil Pasta", tags: "Recipe Dinner Vegetarian Summer", day: 9, serves: "3", time: "20 min", text:
    "Cook 300 g spaghetti. Meanwhile warm olive oil with sliced garlic, add 400 g halved cherry " +
    "tomatoes from the [[Garden]] and cook until they burst. Toss with pasta, torn basil and parmesan." },
  { title: "Weekly Meal Plan", tags: "Planning", day: 10, text:
    "|!Day |!Dinner |\n|Monday |[[Lentil Soup]] |\n|Tuesday |[[Chicken Curry]] |\n" +
    "|Wednesday |leftovers |\n|Thursday |[[Tomato Basil Pasta]] |\n|Friday |pizza night |\n" +
    "|Saturday |[[Shakshuka]] (brunch) |\n|Sunday |roast vegetables |\n\nSee also the [[Shopping List]]." },
  { title: "Shopping List", tags: "Planning", day: 10, minutes: 30, text:
    "* red lentils\n* coconut milk\n* spaghetti\n* eggs (12)\n* feta\n* bananas\n* oats" },
  { title: "Garden", tags: "Start", day: 12, text:
    "Raised beds along the south fence, herbs by the kitchen door.\n\n" +
    "<<list-links filter:\"[tag[Plant]sort[title]]\">>\n\nSee the [[Planting Calendar]]." },
  { title: "Tomatoes", tags: "Plant Vegetable", day: 13, bed: "Bed 1", sown: "2024-03-15", text:
    "Varieties: Gardener's Delight (cherry) and San Marzano. Sow indoors mid-March, plant out after " +
    "the last frost. Pinch out side shoots; feed weekly once the first truss sets." },
  { title: "Basil", tags: "Plant Herb", day: 13, minutes: 20, bed: "Kitchen pots", sown: "2024-04-02", text:
    "Keep on the sunny windowsill until June. Pick from the top to keep it bushy." },
  { title: "Runner Beans", tags: "Plant Vegetable", day: 14, bed: "Bed 2", sown: "2024-05-01", text:
    "Canes in a double row; water heavily when flowering. Pick often." },
  { title: "Rosemary", tags: "Plant Herb Perennial", day: 15, bed: "Kitchen door", sown: "", text:
    "Established shrub. Trim lightly after flowering; never cut into old wood." },
  { title: "Planting Calendar", tags: "Garden", day: 16, text:
    "|!Month |!Job |\n|March |sow [[Tomatoes]] indoors |\n|April |sow [[Basil]] |\n" +
    "|May |sow [[Runner Beans]] outside |\n|June |plant out tomatoes |\n|September |save seed |" },
  { title: "Household Tasks", tags: "Start", day: 17, text:
    "Open tasks:\n\n<<list-links filter:\"[tag[Task]!tag[Done]sort[due]]\">>\n\nDone:\n\n" +
    "<<list-links filter:\"[tag[Task]tag[Done]]\">>" },
  { title: "Clean Gutters", tags: "Task", day: 18, due: "2024-04-20", assignee: "Sam", text:
    "Front and back gutters; borrow the long ladder from [[Contacts]] (Priya)." },
  { title: "Service Boiler", tags: "Task", day: 18, minutes: 10, due: "2024-05-31", assignee: "Alex", text:
    "Annual service. Book with Northside Heating, ref HB-2291." },
  { title: "Renew Car Insurance", tags: "Task Done", day: 19, due: "2024-03-28", assignee: "Alex", text:
    "Renewed with the same insurer; documents in the blue folder." },
  { title: "Repaint Fence", tags: "Task", day: 20, due: "2024-06-15", assignee: "Sam", text:
    "Two coats of the sage-green wood stain; about 3 tins." },
  { title: "Contacts", tags: "Start", day: 21, text:
    "|!Name |!Role |!Phone |\n|Priya Shah |neighbour (ladder, spare key) |01632 960 118 |\n" +
    "|Northside Heating |boiler service |01632 960 774 |\n|Dr. Okafor |GP surgery |01632 960 302 |" },
  { title: "Book Club Notes", tags: "Notes", day: 23, text:
    "March pick: //The Remains of the Day//. Next meeting at Priya's on the 12th; bring [[Banana Bread]]." },
];

function tidFile(t) {
  const fields = { created: stamp(t.day || 0, t.minutes), modified: stamp(t.day || 0, t.minutes) };
  for (const [key, value] of Object.entries(t)) {
    if (!["title", "text", "day", "minutes"].includes(key)) fields[key] = value;
  }
  if (t.title.startsWith("$:/")) {
    delete fields.created;
    delete fields.modified;
  }
  const lines = ["title: " + t.title];
  for (const key of Object.keys(fields).sort()) lines.push(key + ": " + fields[key]);
  lines.push("type: text/vnd.tiddlywiki");
  return lines.join("\n") + "\n\n" + t.text + "\n";
}

for (const t of tiddlers) {
  // Filenames only need to be unique and safe; TiddlyWiki reads the title from the file.
  const name = t.title.replace(/[^A-Za-z0-9]+/g, "_").replace(/^_+|_+$/g, "") + ".tid";
  fs.writeFileSync(path.join(dir, name), tidFile(t));
}
console.log("seeded " + tiddlers.length + " tiddlers");
