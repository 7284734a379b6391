// Undo the ARIA copies of bids that mark_elements.js wrote, in the page and every frame it
// marked, leaving the page's own ARIA values exactly as they were. The `bid` attributes
// themselves stay: actions find elements by them.
() => {
    const PREFIX = /^browsergym_id_\S*\s/;
    const walk = (root) => {
        for (const element of root.querySelectorAll("*")) {
            for (const attribute of ["aria-roledescription", "aria-description"]) {
                const value = element.getAttribute(attribute);
                if (value === null) continue;
                const original = value.replace(PREFIX, "");
                if (original) element.setAttribute(attribute, original);
                else element.removeAttribute(attribute);
            }
            if (element.shadowRoot) walk(element.shadowRoot);
            const tag = element.tagName.toLowerCase();
            if (tag === "iframe" || tag === "frame") {
                let inner = null;
                try {
                    inner = element.contentDocument;
                } catch {}
                if (inner) walk(inner);
            }
        }
    };
    walk(document);
}
