// Print, as JSON after a marker line, the tiddlers a TiddlyWiki filter selects in a wiki
// folder, as TiddlyWiki itself loads them from disk (all fields as strings, "text" included).
// Usage: node read_tiddlers.js <wiki folder> <filter>. Exit 3 on a malformed filter.
"use strict";
const [wikiDir, filter] = process.argv.slice(2);
const $tw = require("tiddlywiki").TiddlyWiki();
// Boot without the wiki folder: booting it would start the filesystem syncer, which writes
// files (e.g. $:/StoryList). A reader must only read, so the tiddlers are loaded afterwards.
// TiddlyWiki prints its usage when booted without arguments: hence the marker line.
$tw.boot.argv = [];
$tw.boot.boot(() => {
  $tw.loadWikiTiddlers(wikiDir);
  const titles = $tw.wiki.filterTiddlers(filter);
  if (titles.length === 1 && titles[0].startsWith("Filter error:")) {
    process.stderr.write(titles[0] + "\n");
    process.exit(3);
  }
  const rows = [];
  for (const title of titles) {
    const tiddler = $tw.wiki.getTiddler(title);
    if (tiddler) rows.push(tiddler.getFieldStrings());
  }
  process.stdout.write("\n@@worldtrace-json@@\n" + JSON.stringify(rows));
});
