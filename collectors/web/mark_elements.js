// Give every element of one frame a BrowserGym-compatible id ("bid") and copy it into the ARIA
// attributes that Chromium exposes in the accessibility tree, so the tree can name elements by
// the same ids the actions use. Runs once per frame per observation; `unmark_elements.js`
// removes the ARIA copies again right after the tree is read, so the page never keeps them.
//
// Ids: elements get numbers from a per-document counter ("0", "1", …); frames get letters
// ("a" … "z", then "aA", "aB", …); everything inside a frame is prefixed with the frame's id
// ("a12", nested: "ab3"). An element keeps its id for the life of its document, so ids are
// stable from step to step until the page navigates.
//
// Returns [marked, frameBid, activeBid, activeIsFrame] so one call per frame also tells where
// the keyboard focus is; `null` for a frame that cannot be marked (its element in the parent
// is not reachable or not marked yet), which is then left out of the tree's ids.
() => {
    const ATTR = "bid";
    let frameBid = "";
    if (window !== window.top) {
        const holder = window.frameElement;
        if (!holder || !holder.getAttribute(ATTR)) return null;
        frameBid = holder.getAttribute(ATTR);
    }
    const state = (window.__worldtraceBids = window.__worldtraceBids || {
        nextElement: 0,
        frameDigits: [0],
    });

    function nextFrameLetters() {
        // "a" … "z", then "aA" … "aZ", "bA" …: a counter in base 26 whose most significant
        // digit is written lower-case and the others upper-case, so a frame id is always one
        // lower-case letter followed by upper-case ones and nested ids split unambiguously.
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

    const seen = new Set();
    let count = 0;
    for (const element of allElements(document)) {
        let bid = element.getAttribute(ATTR);
        // A copied node (cloneNode, innerHTML of a marked subtree) carries a used id: renumber.
        if (bid === null || seen.has(bid)) {
            const tag = element.tagName.toLowerCase();
            const local = tag === "iframe" || tag === "frame"
                ? nextFrameLetters()
                : String(state.nextElement++);
            bid = frameBid + local;
            element.setAttribute(ATTR, bid);
        }
        seen.add(bid);
        pushBid(element, "aria-roledescription", bid);
        // Generic nodes drop roledescription from the tree; description survives there.
        pushBid(element, "aria-description", bid);
        count += 1;
    }
    let active = document.activeElement;
    while (active && active.shadowRoot && active.shadowRoot.activeElement) {
        active = active.shadowRoot.activeElement;
    }
    const activeTag = active ? active.tagName.toLowerCase() : "";
    const activeBid = active ? active.getAttribute(ATTR) || "" : "";
    return [count, frameBid, activeBid, activeTag === "iframe" || activeTag === "frame"];
}
