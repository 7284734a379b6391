# Entry points for people and CI. `setup` is idempotent and fast once done (see scripts/setup.sh),
# so every target that needs Docker, the images or the venv depends on it.
.PHONY: setup demo test lint bench clean-sandboxes

setup:
	bash scripts/setup.sh

# A small end-to-end collection: scripted tasks and an exploring policy, normalized to parquet.
demo: setup
	.venv/bin/worldtrace collect terminal --episodes 8 --workers 2 --out runs/ --run-name demo-script
	.venv/bin/worldtrace collect terminal --policy explore --episodes 2 --workers 2 --max-steps 30 \
		--out runs/ --run-name demo-explore

test: setup
	.venv/bin/pytest -q -p no:cacheprovider

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

bench: setup
	.venv/bin/python benchmarks/terminal.py

clean-sandboxes:
	.venv/bin/worldtrace sandboxes gc --all
