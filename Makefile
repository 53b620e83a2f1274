# The platform's commands. `make run` runs it locally; `make test` is what CI runs.
SHELL := /bin/bash
.DEFAULT_GOAL := help
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: help deps up up-cluster up-replica down status run build replay reset-offsets keys test test-unit test-integration bench bench-floors bench-tools alerts alerts-tools chaos lint config-doc typecheck format clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 20

# npm ci only when the lock file changed since the last install.
node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

deps: node_modules/.package-lock.json ## install npm dependencies (npm ci)

up: deps ## fetch (once) and start PostgreSQL (127.0.0.1:5442; unless DATABASE_URL is set), Kafka and the schema registry; create topics
	bash infra/local/up.sh

up-cluster: deps ## the same with a three-node KRaft cluster (ports 19092/29092/39092)
	KAFKA_NODES=3 bash infra/local/up.sh

up-replica: up ## a streaming hot standby of `make up`'s PostgreSQL on 127.0.0.1:5443 (.local/pg/standby)
	bash infra/local/pg.sh start-replica

down: ## stop exactly the processes `make up` started (data stays in .local/)
	bash infra/local/down.sh

status: ## what of the local stack is running
	-@bash infra/local/kafka.sh status; bash infra/local/registry.sh status; bash infra/local/pg.sh status

run: up ## the whole platform with demo data: simulator, 14 pollers, materializer, API on :8080; demo keys printed and in .local/demo-keys.json; Ctrl-C stops all; refuses to start while it (or anything on its ports) runs
	node --import tsx infra/local/run.ts

build: deps ## the services compiled ahead into dist/ (api.mjs, poller.mjs, materializer.mjs, simulator.mjs): what a deployment runs with `node --enable-source-maps dist/<service>.mjs`; make run compiles its own at each start
	node --import tsx infra/local/build.ts dist

keys: deps ## manage API keys: make keys ARGS='create --customer acme --plan pro' (list, disable, expire, restrict)
	node --import tsx services/api/src/keys-cli.ts $(ARGS)

replay: up ## rebuild the read model from the topics (stop the materializer first); prints table checksums
	node --import tsx services/materializer/src/replay-main.ts

reset-offsets: up ## show the materializer's stored offsets against the Kafka cluster; ARGS=--yes deletes them (materializer stopped)
	node --import tsx services/materializer/src/reset-offsets-main.ts $(ARGS)

typecheck: deps ## tsc over every package, service and test
	tsc -p tsconfig.json

lint: deps typecheck ## typecheck, eslint (style-model rules), import cycles, unused code (knip), the docs' config tables and links, prettier --check
	eslint .
	tsx infra/lint/import-cycles.ts
	knip
	tsx infra/lint/config-doc.ts
	tsx infra/lint/links.ts
	prettier --check .

config-doc: deps ## rewrite docs/operations.md's configuration tables from the services' config schemas
	tsx infra/lint/config-doc.ts --write

format: deps ## prettier --write
	prettier --write .

test-unit: deps ## unit tests (no services needed)
	vitest run --project unit

test-integration: up up-replica bench-tools ## integration tests against the real Kafka, registry and PostgreSQL (and the benchmarks' smoke run)
	vitest run --project integration

bench-tools: ## nginx, wrk, curl and Chromium from Debian's packages (the benchmarks' limit and load generator; the clients customers run)
	@command -v nginx >/dev/null && command -v wrk >/dev/null && command -v curl >/dev/null && command -v chromium >/dev/null || \
	  { apt-get install -y -q nginx-light wrk curl chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q nginx-light wrk curl chromium >/dev/null; }; }

# Only promtool is wanted: no recommends (node exporter …), and a server the package starts is stopped.
alerts-tools: ## promtool from Debian's prometheus package (checks and unit-tests the alert rules)
	@command -v promtool >/dev/null || \
	  { { apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends prometheus >/dev/null; }; } && \
	    { service prometheus stop >/dev/null 2>&1 || true; }; }

alerts: alerts-tools ## check and unit-test the Prometheus alert rules (infra/prometheus)
	promtool check rules infra/prometheus/alerts.yml
	promtool check config infra/prometheus/prometheus.yml
	promtool test rules infra/prometheus/alerts.test.yml

bench: up up-replica bench-tools ## every benchmark at full size, 3 runs each: bench/results.md and bench/results.json (about 45 min)
	node --import tsx bench/run.ts

bench-floors: up ## what any design reaches here, PostgreSQL only: the ingest path's floor (bench/ingest-floor.ts, 3 runs) and a list patch's cost by size (bench/list-patch.ts)
	node --import tsx bench/ingest-floor.ts --runs 3 --out bench/results/ingest-floor.json
	node --import tsx bench/list-patch.ts

chaos: up ## bounded fault run (~20 min): broker kill on a three-node cluster, materializer kills, upstream faults, hostile requests, the limiter, poisoned records: reliability/results.md and results.json; CHAOS_SEED=n repeats a run
	node --import tsx reliability/run.ts

.PHONY: soak
soak: up ## the platform for an hour under a steady mix: reliability/results/soak.json and soak.md; SOAK_MINUTES=n (default 60), SOAK_SAMPLE_S=n (60)
	node --import tsx reliability/soak.ts

test: lint alerts test-unit test-integration ## everything CI runs: lint, the alert rules, unit, integration (starts the stack when needed)

clean: down ## stop the stack and delete its data (downloads are kept)
	rm -rf .local/kafka/data .local/run .local/logs .local/pg
