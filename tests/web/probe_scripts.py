"""Page scripts shared by the BrowserGym comparison test and its probe (both sides run them).

``DOM_PATHS_JS`` returns each marked element's DOM path (tag and sibling index from the root),
which names the same element in two browsers that loaded the same page. ``CATCH_CLICK_JS``
installs a capturing click listener that records the path of the click's target and cancels
the click, so an action's reach can be compared without the page navigating away.
``ANIMATIONS_DONE_JS`` is true once no finite CSS animation or transition runs (the rule our
environment settles by): BrowserGym's reset does not wait for TiddlyWiki's story river to
open, and its click gives up after 500 ms on an element that is "not stable".
"""

DOM_PATHS_JS = """() => {
    const path = (el) => {
        const parts = [];
        while (el && el.nodeType === 1) {
            let index = 0;
            for (let s = el.previousElementSibling; s; s = s.previousElementSibling) index++;
            parts.unshift(el.tagName.toLowerCase() + ':' + index);
            el = el.parentElement || (el.getRootNode && el.getRootNode().host) || null;
        }
        return parts.join('/');
    };
    window.__probePath = path;
    const out = {};
    for (const el of document.querySelectorAll('[bid]')) out[el.getAttribute('bid')] = path(el);
    return out;
}"""

CATCH_CLICK_JS = """() => {
    window.__probeClicked = null;
    if (window.__probeListening) return;
    window.__probeListening = true;
    document.addEventListener('click', (event) => {
        window.__probeClicked = window.__probePath(event.target);
        event.preventDefault();
        event.stopImmediatePropagation();
    }, true);
}"""

ANIMATIONS_DONE_JS = """() => document.getAnimations().every((animation) => {
    if (animation.playState !== 'running' || !animation.effect) return true;
    return !Number.isFinite(animation.effect.getComputedTiming().endTime);
})"""
