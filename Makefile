# Entry points for people and CI. `setup` is idempotent and fast once done (see scripts/setup.sh),
# so every target that needs Docker, the images or the venv depends on it.
.PHONY: setup reference-envs demo test lint typecheck docs bench clean-sandboxes

# Which domains setup prepares (scripts/setup.sh: their Debian packages and images): none by
# default, since a domain's images are built the first time it is used; a target that needs
# them says which. A target's value holds for its prerequisites, setup included.
WORLDTRACE_DOMAINS ?=
demo bench: WORLDTRACE_DOMAINS = terminal
test: WORLDTRACE_DOMAINS = all

setup:
	@WORLDTRACE_DOMAINS='$(WORLDTRACE_DOMAINS)' bash scripts/setup.sh

# The whole pipeline on a small terminal collection: collect in real containers, curate with
# datatrove, publish a Hub-layout folder to dist/demo, then print its summary. Each demo starts
# from fresh folders: `worldtrace run` resumes a pipeline, and curation refuses to resume onto
# a corpus whose input changed (as it does after an upgrade that renders rows differently).
demo: setup
	@rm -rf runs/demo-pipeline corpora/demo dist/demo
	.venv/bin/worldtrace run configs/demo-pipeline.yaml
	.venv/bin/worldtrace inspect dist/demo

# The reference environments the web and os tests compare against (BrowserGym, OSWorld) live
# in virtual environments of their own: only the tests need them.
reference-envs:
	bash scripts/browsergym_venv.sh
	bash scripts/osworld_venv.sh

# --durations: every run names its slowest tests, to keep the suite inside its budget.
# lint first: a lint or type error fails the run before the suite's long minutes.
# Four worker processes: a serial run leaves about half of the two cores idle (tests wait on
# containers, browsers and servers); on 2026-12-02 four ended 10-30% sooner than three, and
# two, three and four each sooner than the one before (docs/testing.md). Each module runs whole
# in one worker, the web tests in one worker one after another, the longest folders first
# (tests/conftest.py).
test: setup reference-envs
	$(MAKE) lint
	.venv/bin/pytest -q -p no:cacheprovider --durations=15 -n 4 --dist loadgroup --no-loadscope-reorder

lint: typecheck
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

# mypy with pyproject.toml's [tool.mypy] on build/typecheck/worldtrace: links that make each layer
# the `worldtrace.<layer>` it is installed as (as setup.py does), so imports between layers
# resolve. Its cache stays in build/typecheck/.mypy_cache between runs.
typecheck:
	@rm -rf build/typecheck/worldtrace && mkdir -p build/typecheck/worldtrace
	@ln -s $(CURDIR)/worldtrace/__init__.py build/typecheck/worldtrace/__init__.py
	@for init in */__init__.py; do layer=$${init%/__init__.py}; \
	  case $$layer in worldtrace|tests) ;; *) ln -s $(CURDIR)/$$layer build/typecheck/worldtrace/$$layer ;; esac; \
	done
	.venv/bin/mypy

# The documentation site (mkdocs.yml, docs/) into site/; strict, so a broken link or anchor, or a
# page missing from the nav, fails the build. Needs only the venv (the dev extra), not Docker.
docs:
	@test -x .venv/bin/mkdocs || { echo "docs: .venv/bin/mkdocs is missing: run make setup (or .venv/bin/pip install -e '.[dev]')" >&2; exit 1; }
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir site

bench: setup
	.venv/bin/python benchmarks/terminal.py

clean-sandboxes:
	.venv/bin/worldtrace sandboxes gc --all
