// Give every element of the page and of its same-origin frames a BrowserGym-compatible id
// ("bid") and copy it into the ARIA attributes that Chromium exposes in the accessibility tree,
// so the tree can name elements by the same ids the actions use. Runs once per observation in
// the top document (one DevTools call with a timeout, see observation.py) and reaches into
// every frame whose document it may read; `unmark_elements.js` removes the ARIA copies again
// right after the tree is read, so the page never keeps them.
//
// Ids: elements get numbers from a per-document counter ("0", "1", …); frames get letters
// ("a" … "z", then "aA", "aB", …); everything inside a frame is prefixed with the frame's id
// ("a12", nested: "ab3"). An element keeps its id for the life of its document, so ids are
// stable from step to step until the page navigates. A frame whose document cannot be read
// (another origin, a refused or sandboxed frame) is left unmarked, as in BrowserGym.
//
// Returns [marked, focusedBid]: how many elements carry an id, and the id of the element that
// has the keyboard focus, followed from the top document into the frames that hold it ('' when
// nothing has focus).
() => {
    const ATTR = "bid";
    const isFrame = (element) => {
        const tag = element.tagName.toLowerCase();
        return tag === "iframe" || tag === "frame";
    };
    const readableDocument = (frameElement) => {
        try {
            return frameElement.contentDocument; // null for another origin
        } catch {
            return null;
        }
    };

    function allElements(root) {
        // Elements inside open shadow roots follow their host, in document order.
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
            // "a" … "z", then "aA" … "aZ", "bA" …: a counter in base 26 whose most significant
            // digit is written lower-case and the others upper-case, so a frame id is always
            // one lower-case letter followed by upper-case ones and nested ids split
            // unambiguously.
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

        const seen = new Set();
        const frames = [];
        let count = 0;
        for (const element of allElements(doc)) {
            let bid = element.getAttribute(ATTR);
            // A copied node (cloneNode, innerHTML of a marked subtree) carries a used id.
            if (bid === null || seen.has(bid)) {
                const local = isFrame(element) ? nextFrameLetters() : String(state.nextElement++);
                bid = frameBid + local;
                element.setAttribute(ATTR, bid);
            }
            seen.add(bid);
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
    return [marked, focused];
}
