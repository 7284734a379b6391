// Give the elements of the page and of its same-origin frames BrowserGym's ids ("bids") and
// copy them into the ARIA attributes that Chromium exposes in the accessibility tree, so the
// tree names elements by the same ids the actions use. A port of BrowserGym's
// `frame_mark_elements.js` (browsergym-core 0.14.3, Apache-2.0), element for element: the same
// elements get the same bids, so an action text means the same element under BrowserGym.
// Runs once per observation in the top document (one DevTools call with a timeout, see
// observation.py) and reaches into every frame whose document it may read;
// `unmark_elements.js` removes the ARIA copies again right after the tree is read.
//
// Argument: tagsToMark, as BrowserGym's `tags_to_mark`: "standard_html" (BrowserGym's
// default) marks only standard HTML tags, so inline SVG children and custom elements get no
// bid and keep their own accessibility role (an `svg` is marked, its `path`s are not); "all"
// marks every element (how this project marked pages before, kept as an explicit option).
//
// Ids: elements get numbers from a per-document counter ("0", "1", …); frames get letters
// ("a" … "z", then "aA", "aB", …); everything inside a frame is prefixed with the frame's id
// ("a12", nested: "ab3"). An element keeps its id for the life of its document. A frame whose
// document cannot be read (another origin, a sandboxed frame without scripts) is left
// unmarked, as in BrowserGym. As BrowserGym does, the marking also writes an element's current
// `value` and `checked` state into its attributes (BrowserGym reads them from the DOM).
//
// Visibility: as BrowserGym, an IntersectionObserver measures which share of each marked
// element is inside the viewport (0 … 1, two decimals, written to `browsergym_visibility_ratio`);
// the renderer prints `visible` on elements with a share of at least 0.5, so a scroll changes
// the text.
//
// Returns a promise of [marked, focusedBid, visibility]: how many elements carry an id, the
// id of the element that has the keyboard focus ('' when nothing has focus), and
// {bid: visibility ratio} for every marked element.
async (tagsToMark) => {
    const ATTR = "bid";
    const VISIBILITY_ATTR = "browsergym_visibility_ratio";
    const VISIBILITY_TIMEOUT_MS = 1000; // BrowserGym's visibility_marking_timeout
    // BrowserGym's list of standard HTML tags (https://www.w3schools.com/tags/), verbatim.
    const HTML_TAGS = new Set([
        "a", "abbr", "acronym", "address", "applet", "area", "article", "aside", "audio",
        "b", "base", "basefont", "bdi", "bdo", "big", "blockquote", "body", "br", "button",
        "canvas", "caption", "center", "cite", "code", "col", "colgroup", "data", "datalist",
        "dd", "del", "details", "dfn", "dialog", "dir", "div", "dl", "dt", "em", "embed",
        "fieldset", "figcaption", "figure", "font", "footer", "form", "frame", "frameset",
        "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "i",
        "iframe", "img", "input", "ins", "kbd", "label", "legend", "li", "link", "main",
        "map", "mark", "menu", "meta", "meter", "nav", "noframes", "noscript", "object",
        "ol", "optgroup", "option", "output", "p", "param", "picture", "pre", "progress",
        "q", "rp", "rt", "ruby", "s", "samp", "script", "search", "section", "select",
        "small", "source", "span", "strike", "strong", "style", "sub", "summary", "sup",
        "svg", "table", "tbody", "td", "template", "textarea", "tfoot", "th", "thead",
        "time", "title", "tr", "track", "tt", "u", "ul", "var", "video", "wbr",
    ]);
    if (tagsToMark !== "all" && tagsToMark !== "standard_html") {
        throw new Error(`invalid tagsToMark: ${JSON.stringify(tagsToMark)}`);
    }
    const shouldMark = (element) =>
        tagsToMark === "all" || (!!element.tagName && HTML_TAGS.has(element.tagName.toLowerCase()));
    const isFrame = (element) => {
        const tag = element.tagName.toLowerCase();
        return tag === "iframe" || tag === "frame";
    };
    const readableDocument = (frameElement) => {
        // BrowserGym skips sandboxed frames that may not run scripts (it cannot evaluate there).
        const sandbox = frameElement.getAttribute("sandbox");
        if (sandbox !== null && !sandbox.split(/\s+/).includes("allow-scripts")) return null;
        try {
            return frameElement.contentDocument; // null for another origin
        } catch {
            return null;
        }
    };

    function allElements(root) {
        // Elements inside open shadow roots follow their host, in document order (as BrowserGym
        // splices them into its list right after the host).
        const found = [];
        const walk = (node) => {
            for (const element of node.querySelectorAll("*")) {
                found.push(element);
                if (element.shadowRoot) walk(element.shadowRoot);
            }
        };
        walk(root);
        return found;
    }

    function pushBid(element, attribute, bid) {
        const original = element.getAttribute(attribute) || "";
        element.setAttribute(attribute, `browsergym_id_${bid} ${original}`);
    }

    const visibility = {};
    const pendingVisibility = new Set();
    const observers = [];

    // Marks one document; returns how many elements, and its frames with their ids.
    function markDocument(doc, frameBid) {
        const view = doc.defaultView;
        if (!view) return [0, []];
        // Kept on the document's own window: a new document (a navigation) starts again.
        const state = (view.__worldtraceBids = view.__worldtraceBids || {
            nextElement: 0,
            frameDigits: [0],
        });

        function nextFrameLetters() {
            // "a" … "z", then "aA" … "aZ", "bA" …: BrowserGym's IFrameIdGenerator.
            const letters = "abcdefghijklmnopqrstuvwxyz";
            const digits = state.frameDigits; // least significant first
            const id = digits
                .map((d, i) => (i === digits.length - 1 ? letters[d] : letters[d].toUpperCase()))
                .reverse()
                .join("");
            let i = 0;
            while (i < digits.length && ++digits[i] === 26) digits[i++] = 0;
            if (i === digits.length) digits.push(0);
            return id;
        }

        // The frame's own IntersectionObserver: its root is the top-level viewport, as for
        // BrowserGym's observer created inside the frame.
        const observer = new view.IntersectionObserver(
            (entries) => {
                for (const entry of entries) {
                    const element = entry.target;
                    const ratio = Math.round(entry.intersectionRatio * 100) / 100;
                    element.setAttribute(VISIBILITY_ATTR, ratio);
                    const bid = element.getAttribute(ATTR);
                    if (bid !== null) visibility[bid] = ratio;
                    pendingVisibility.delete(element);
                }
            },
            { threshold: [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0] },
        );
        observers.push(observer);

        const seen = new Set();
        const frames = [];
        let count = 0;
        for (const element of allElements(doc)) {
            if (!shouldMark(element)) continue;
            element.setAttribute(VISIBILITY_ATTR, 0);
            pendingVisibility.add(element);
            observer.observe(element);
            // BrowserGym writes dynamic values and checked states into the DOM.
            if (typeof element.value !== "undefined") element.setAttribute("value", element.value);
            if (typeof element.checked !== "undefined") {
                if (element.checked === true) element.setAttribute("checked", "");
                else element.removeAttribute("checked");
            }
            let bid = element.getAttribute(ATTR);
            // A copied node (cloneNode, innerHTML of a marked subtree) carries a used id.
            if (bid === null || seen.has(bid)) {
                const local = isFrame(element) ? nextFrameLetters() : String(state.nextElement++);
                bid = frameBid + local;
                element.setAttribute(ATTR, bid);
            }
            seen.add(bid);
            visibility[bid] = 0;
            pushBid(element, "aria-roledescription", bid);
            // Generic nodes drop roledescription from the tree; description survives there.
            pushBid(element, "aria-description", bid);
            count += 1;
            if (isFrame(element)) frames.push([element, bid]);
        }
        return [count, frames];
    }

    let marked = 0;
    const pending = [[document, ""]]; // parents first: a frame's prefix is its element's id
    while (pending.length) {
        const [doc, frameBid] = pending.shift();
        const [count, frames] = markDocument(doc, frameBid);
        marked += count;
        for (const [element, bid] of frames) {
            const inner = readableDocument(element);
            if (inner) pending.push([inner, bid]);
        }
    }

    // Wait (as BrowserGym, at most a second) until every marked element was measured once.
    // Polled through requestAnimationFrame-free timers: observer callbacks run after a frame.
    const started = Date.now();
    while (pendingVisibility.size > 0 && Date.now() - started < VISIBILITY_TIMEOUT_MS) {
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
    for (const observer of observers) observer.disconnect();

    let focused = "";
    let doc = document;
    while (doc) {
        let active = doc.activeElement;
        while (active && active.shadowRoot && active.shadowRoot.activeElement) {
            active = active.shadowRoot.activeElement;
        }
        if (!active) break;
        focused = active.getAttribute(ATTR) || "";
        doc = isFrame(active) ? readableDocument(active) : null;
    }
    return [marked, focused, visibility];
}
