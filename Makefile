# Entry points for people and CI. `setup` is idempotent and fast once done (see scripts/setup.sh),
# so every target that needs Docker, the images or the venv depends on it.
.PHONY: setup reference-envs demo test lint bench clean-sandboxes

setup:
	bash scripts/setup.sh

# The whole pipeline on a small terminal collection: collect in real containers, curate with
# datatrove, publish a Hub-layout folder to dist/demo, then print its summary. Each demo starts
# from fresh folders: `worldtrace run` resumes a pipeline, and curation refuses to resume onto
# a corpus whose input changed (as it does after an upgrade that renders rows differently).
demo: setup
	rm -rf runs/demo-pipeline corpora/demo dist/demo
	.venv/bin/worldtrace run configs/demo-pipeline.yaml
	.venv/bin/worldtrace inspect dist/demo

# The reference environments the web and os tests compare against (BrowserGym, OSWorld) live
# in virtual environments of their own: only the tests need them.
reference-envs:
	bash scripts/browsergym_venv.sh
	bash scripts/osworld_venv.sh

# --durations: every run names its slowest tests, to keep the suite inside its budget.
test: setup reference-envs
	.venv/bin/pytest -q -p no:cacheprovider --durations=15

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

bench: setup
	.venv/bin/python benchmarks/terminal.py

clean-sandboxes:
	.venv/bin/worldtrace sandboxes gc --all
