# kplane developer tasks. `make help` lists them.
.DEFAULT_GOAL := help
CARGO ?= cargo
FUZZ_SECONDS ?= 60

.PHONY: help run up test test-suite test-console test-engines test-api-fuzz test-tls compose-check broker lint fmt bench fuzz samples bless p4

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

run: ## Everything in one process: emulator, collector, processor, API + console (the README's first command)
	$(CARGO) run --release -- up

up: run ## Same as run

test: ## Run every test (unit, integration, golden, property, fuzz-corpus replay, end to end, Kafka, the console in Chromium, API fuzzing with Schemathesis, TLS behind nginx); starts the local broker unless KPLANE_KAFKA_BROKERS names one
	@if [ -n "$$KPLANE_KAFKA_BROKERS" ]; then \
	  KPLANE_REQUIRE_KAFKA=1 $(MAKE) --no-print-directory test-suite; \
	else \
	  broker=$$(scripts/kafka-broker.sh start) || exit 1; \
	  trap 'scripts/kafka-broker.sh stop' EXIT; \
	  env $$broker KPLANE_REQUIRE_KAFKA=1 $(MAKE) --no-print-directory test-suite; \
	fi

test-suite: ## The tests alone, against the broker in KPLANE_KAFKA_BROKERS (Kafka tests return early, saying so, without one)
	$(CARGO) nextest run --workspace --locked --no-fail-fast
	$(CARGO) test --workspace --locked --doc
	scripts/console-test.sh
	scripts/api-fuzz.sh
	scripts/tls-test.sh
	scripts/engines-check.sh

test-console: ## The web console in Debian's Chromium against `kplane up` (screenshot: target/console.png)
	scripts/console-test.sh

test-api-fuzz: ## Schemathesis against `kplane up` from the OpenAPI document, as every role: no 5xx (needs pip install schemathesis)
	scripts/api-fuzz.sh

test-engines: ## DuckDB and Spark (PyPI duckdb, pyspark; Java 17) read the analytics store `kplane up` wrote: their counts and sums equal `kplane query`'s
	scripts/engines-check.sh

test-tls: ## TLS in front of `kplane up`: nginx with deploy/tls/nginx.conf, checked over real TLS (needs nginx)
	scripts/tls-test.sh

compose-check: ## docker-compose.yml run for real with podman: healthy, flows answered, Prometheus targets up, every Grafana panel's query has series; torn down (root; podman, runc, podman-compose; LOCAL_IMAGES=1 without a registry)
	scripts/compose-check.sh $(if $(LOCAL_IMAGES),--local-images)

broker: ## Start the local Kafka-protocol broker on 127.0.0.1:19092 (stop: scripts/kafka-broker.sh stop)
	scripts/kafka-broker.sh start

lint: ## rustfmt --check, clippy -D warnings, no public Result<_, String> (scripts/structure.py), and the deployment files against the Kubernetes and Compose schemas
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	python3 scripts/structure.py --check
	deploy/validate.sh

fmt: ## Format the code
	$(CARGO) fmt --all

bench: ## Criterion benchmarks (reports/s): decode, collector pipeline; results in target/criterion
	$(CARGO) bench -p kplane-wire --bench decode
	$(CARGO) bench -p kplane-collector --features bench --bench pipeline

fuzz: ## Run each cargo-fuzz target for FUZZ_SECONDS (needs cargo-fuzz and a nightly toolchain)
	cd fuzz && for t in decode_report decode_frame; do \
	  mkdir -p work/$$t && $(CARGO) +nightly fuzz run $$t work/$$t corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; done

p4: ## Compile p4/kplane_int.p4 with p4c into p4/build/ (BMv2 JSON, P4Info as JSON and binary; commit them)
	p4c --target bmv2 --arch v1model --std p4-16 -o p4/build \
	  --p4runtime-files p4/build/kplane_int.p4info.json,p4/build/kplane_int.p4info.bin p4/kplane_int.p4
	rm -f p4/build/kplane_int.p4i

samples: ## Regenerate samples/int-formats.pcapng
	$(CARGO) run -- sample-capture samples/int-formats.pcapng

bless: ## Regenerate golden vectors and fuzz seeds (review the diff!)
	KPLANE_BLESS=1 $(CARGO) test -p kplane-wire --test golden --test fuzz_corpus
	KPLANE_BLESS=1 $(CARGO) test -p kplane-stream-processor --lib planned_schemas_are_the_stores
	KPLANE_BLESS=1 $(CARGO) test -p kplane-stream-processor --test golden_sql
	KPLANE_BLESS=1 $(CARGO) test -p kplane-intent-api --test api
