//! The OpenAPI 3 document, generated from [`ROUTES`] — the same table the tests walk to check
//! that every documented route is served and every served route is documented.

use serde_json::{Map, Value, json};

use crate::auth::Role;

/// A query or path parameter.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub location: &'static str,
    pub schema: &'static str,
    pub description: &'static str,
}

const fn q(name: &'static str, schema: &'static str, description: &'static str) -> Param {
    Param {
        name,
        location: "query",
        schema,
        description,
    }
}

const fn p(name: &'static str, schema: &'static str, description: &'static str) -> Param {
    Param {
        name,
        location: "path",
        schema,
        description,
    }
}

/// One route of the API.
#[derive(Clone, Copy, Debug)]
pub struct RouteDoc {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    pub role: Role,
    pub params: &'static [Param],
    /// Top-level keys of the JSON answer (or the content type when not JSON).
    pub returns: &'static [&'static str],
    /// The request body's schema (a name under `components/schemas`), if it takes one.
    pub body: Option<&'static str>,
}

/// The `{id}` of the `/v1/switches/{id}/…` routes.
const SWITCH_ID: Param = p("id", "integer", "switch (node) id");

const RANGE: [Param; 3] = [
    q(
        "from",
        "string",
        "start, RFC 3339 (e.g. 2026-11-21T13:00:00Z)",
    ),
    q("to", "string", "end (exclusive), RFC 3339"),
    q(
        "since",
        "string",
        "instead of from: a duration back from now (default 15m)",
    ),
];

/// `/v1/anomalies` and its stream filter alike.
const ANOMALY_FILTER: [Param; 6] = [
    q(
        "type",
        "string",
        "ddos, port_scan, congestion, link_failure, routing_loop, black_hole or unknown",
    ),
    q(
        "entity_kind",
        "string",
        "source, destination, queue, link or flow",
    ),
    q(
        "entity",
        "string",
        "an address, node/queue (5/0) or node:port (5:2)",
    ),
    q("state", "string", "open or closed"),
    q(
        "since",
        "string",
        "episodes open within this duration back from now (e.g. 1h)",
    ),
    q("limit", "integer", "1..10000 (default 100)"),
];

pub const ROUTES: &[RouteDoc] = &[
    RouteDoc {
        method: "get",
        path: "/v1/flows",
        summary: "Flows in a time range: reports, bytes, latency (sum of hop latencies), trajectory; filtered, sorted, paginated",
        role: Role::Viewer,
        params: &[
            RANGE[0],
            RANGE[1],
            RANGE[2],
            q("src", "string", "source prefix, e.g. 10.0.0.0/8"),
            q("dst", "string", "destination prefix"),
            q("src_port", "string", "port or range a-b"),
            q("dst_port", "string", "port or range a-b"),
            q("protocol", "integer", "IP protocol number"),
            q("sort", "string", "latency (default), reports or bytes"),
            q("limit", "integer", "rows per page, 1..1000 (default 100)"),
            q("cursor", "string", "next_cursor of the previous page"),
        ],
        body: None,
        returns: &["flows", "next_cursor", "resolution"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/flows/{flow}/path",
        summary: "Trajectory history of one flow per window; per-hop latency (p50/p99/max) at the windows' resolution (ranges up to 6 h)",
        role: Role::Viewer,
        params: &[
            p(
                "flow",
                "string",
                "src,src_port,dst,dst_port,protocol (e.g. 10.0.0.1,1000,10.0.1.1,80,6)",
            ),
            RANGE[0],
            RANGE[1],
            RANGE[2],
        ],
        body: None,
        returns: &["flow", "windows", "resolution"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/switches",
        summary: "Switches seen in the time range with queue and egress utilisation summaries",
        role: Role::Viewer,
        params: &[RANGE[0], RANGE[1], RANGE[2]],
        body: None,
        returns: &["switches", "resolution"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/switches/{id}/queues",
        summary: "Per-window occupancy and congestion of one switch's queues",
        role: Role::Viewer,
        params: &[SWITCH_ID, RANGE[0], RANGE[1], RANGE[2]],
        body: None,
        returns: &["switch", "queues", "resolution"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/switches/{id}/changes",
        summary: "One switch's change log, newest first: its queues' and ports' changes as the collectors saw them, merged into one view per queue and port (table switch_changes)",
        role: Role::Viewer,
        params: &[
            SWITCH_ID,
            RANGE[0],
            RANGE[1],
            RANGE[2],
            q(
                "metric",
                "string",
                "queue_occupancy, queue_congestion, link_utilization or int_label_port",
            ),
            q("limit", "integer", "1..10000 (default 1000)"),
        ],
        body: None,
        returns: &["switch", "changes"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/links",
        summary: "Links as (node, egress port) → next node, with tx utilisation",
        role: Role::Viewer,
        params: &[RANGE[0], RANGE[1], RANGE[2]],
        body: None,
        returns: &["links", "resolution"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/events",
        summary: "Episodes of immediate events (threshold breaches, loss bursts, black holes, path changes, loops) with start, end, peak and crossings, newest first; raw=true: every immediate event",
        role: Role::Viewer,
        params: &[
            RANGE[0],
            RANGE[1],
            RANGE[2],
            q("kind", "string", "one event kind"),
            q("limit", "integer", "1..10000 (default 100)"),
            q(
                "live",
                "boolean",
                "true: from the live feed in memory instead of the store",
            ),
            q(
                "raw",
                "boolean",
                "true: every immediate event (each crossing) instead of episodes",
            ),
        ],
        body: None,
        returns: &["events"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/events/stream",
        summary: "Live immediate events and episode changes as server-sent events (event: alert | episode, data: JSON)",
        role: Role::Viewer,
        params: &[],
        body: None,
        returns: &["text/event-stream"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/live",
        summary: "The latest window of the queues, links, flows and hop_latency tables (what the console polls)",
        role: Role::Viewer,
        params: &[],
        body: None,
        returns: &[
            "queues",
            "links",
            "flows",
            "hop_latency",
            "windows_seen",
            "alerts_seen",
        ],
    },
    RouteDoc {
        method: "get",
        path: "/v1/int-label/ports",
        summary: "INT-label: every (switch, egress port) the processor's int_label windows told of — updates, newest label and arrival, longest gap — with Pro's S and the label-frequency intent carrying it",
        role: Role::Viewer,
        params: &[],
        body: None,
        returns: &["through_ns", "pro", "ports"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/probe-plans",
        summary: "GPINT: each active probe-plan intent's probes over the switches and the links up now — source switch, source-routing stack (next port per switch), measurement ranges — and the switches no probe can reach",
        role: Role::Viewer,
        params: &[],
        body: None,
        returns: &["plans"],
    },
    RouteDoc {
        method: "post",
        path: "/v1/probe-plans/{intent}/status",
        summary: "GPINT's loop: a monitor session's findings — links and switches unavailable, links its probes crossed, congested links. Unavailable ones leave the plan (until a recheck, probe-recheck after last found) and get reroute recommendations for the prefixes whose paths cross them; those are withdrawn once a probe crosses the link again",
        role: Role::Operator,
        params: &[p("intent", "string", "the probe-plan intent")],
        body: Some("ProbeStatus"),
        returns: &["intent", "unavailable", "recommended", "withdrawn"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/int-label/coverage",
        summary: "INT-label's coverage rate per window from the store: telemetry intervals in which ports were updated over those the range's ports could have been",
        role: Role::Viewer,
        params: &RANGE,
        body: None,
        returns: &["coverage"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/incidents",
        summary: "Incidents, most recently started first: breaches (event episodes, anomalies) that share a root (a switch, a link, a destination or source, a flow) within the hold, with kind, severity, peak, affected flows and queues (docs/incidents.md)",
        role: Role::Viewer,
        params: &[
            q("state", "string", "open or resolved"),
            q(
                "kind",
                "string",
                "congestion, report_loss, black_hole, loop, path_change, or an anomaly type",
            ),
            q(
                "root_kind",
                "string",
                "switch, link, destination, source or flow",
            ),
            q(
                "severity",
                "string",
                "at least this severe: info, warning or critical",
            ),
            q(
                "limit",
                "integer",
                "most incidents returned, 1..10000 (default 100)",
            ),
        ],
        body: None,
        returns: &["incidents", "open", "opened", "resolved", "breaches"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/incidents/stream",
        summary: "Incident changes as server-sent events (event: incident, data: {change: open|update|resolve|merge, incident: the summary})",
        role: Role::Viewer,
        params: &[],
        body: None,
        returns: &["text/event-stream"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/incidents/{id}",
        summary: "One incident with its evidence: every member breach (episode ids for /v1/events, anomaly ids with their explanation and recommended intents), the top affected flows, the paths and the timeline",
        role: Role::Viewer,
        params: &[p("id", "string", "the incident id from /v1/incidents")],
        body: None,
        returns: &[
            "id",
            "root",
            "kind",
            "severity",
            "member_list",
            "top_flows",
            "paths",
            "timeline",
        ],
    },
    RouteDoc {
        method: "get",
        path: "/v1/anomalies",
        summary: "Anomaly episodes from the knowledge service, most recently started first, with the explanation's summary and top features",
        role: Role::Viewer,
        params: &ANOMALY_FILTER,
        body: None,
        returns: &["anomalies", "seen", "undecodable"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/anomalies/stream",
        summary: "The matching anomaly episodes' records as server-sent events (event: anomaly, data: the full record of each start, update and end)",
        role: Role::Viewer,
        params: &ANOMALY_FILTER,
        body: None,
        returns: &["text/event-stream"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/anomalies/{id}",
        summary: "One anomaly episode: explanation (features, blast radius), recommended intents, and the intents submitted for it",
        role: Role::Viewer,
        params: &[p("id", "string", "the episode id from /v1/anomalies")],
        body: None,
        returns: &[
            "id",
            "type",
            "entity",
            "explanation",
            "recommendations",
            "intents",
        ],
    },
    RouteDoc {
        method: "get",
        path: "/v1/forecasts",
        summary: "Per series and entity, each window's forecast beside what happened (actual) and the last-value and EWMA baselines",
        role: Role::Viewer,
        params: &[
            q(
                "series",
                "string",
                "link_utilization (entity node:port) or destination_bytes (entity an address)",
            ),
            q("entity", "string", "one entity"),
            q(
                "windows",
                "integer",
                "windows of history per entity, 1..600 (default 60)",
            ),
        ],
        body: None,
        returns: &["forecasts"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/models",
        summary: "The knowledge service's model registry: status (learning, ready, failed), version, per entity kind the features, calibration and training range, the type classifier, the forecast models and their errors, the training history, and what settled and is not raised as unknown yet",
        role: Role::Viewer,
        params: &[q(
            "detail",
            "boolean",
            "true: with each model's fitted parameters",
        )],
        body: None,
        returns: &["status", "version", "models"],
    },
    RouteDoc {
        method: "post",
        path: "/v1/query",
        summary: "Read-only SQL over the analytics store: one SELECT; DDL, DML and settings refused; time, memory and row limits. Tables: flows, hop_latency, queues, links, sources, destinations, event_counts, int_label, int_label_exports, alerts, switch_changes, the rollups (flows_1m, flows_1h, queues_1m, …), anomalies, forecasts, incidents (resolved incidents: id, root_kind, root, kind, severity, start, end, members, flows, summary, record — the whole incident as JSON)",
        role: Role::Viewer,
        params: &[],
        body: Some("Query"),
        returns: &["columns", "rows", "truncated"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/tokens",
        summary: "The configured tokens' names and roles (never their hashes)",
        role: Role::Admin,
        params: &[],
        body: None,
        returns: &["tokens", "no_auth"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/intents",
        summary: "Every intent with its state, entries, per-switch status, expected effect and evidence",
        role: Role::Viewer,
        params: &[q(
            "state",
            "string",
            "only this state: pending-approval, applying, verifying, active, failed, rolled-back, expired, deleted",
        )],
        body: None,
        returns: &["intents"],
    },
    RouteDoc {
        method: "post",
        path: "/v1/intents",
        summary: "Submit an intent (monitor, block, reroute, tune): compiled, conflict-checked, applied (or pending approval for recommendations the policy does not auto-apply); 201",
        role: Role::Operator,
        params: &[],
        body: Some("IntentSpec"),
        returns: &["id", "state", "entries", "switches", "expected_effect"],
    },
    RouteDoc {
        method: "post",
        path: "/v1/intents/dry-run",
        summary: "Compile and check an intent without applying it: the per-switch diff, or why it would be refused",
        role: Role::Operator,
        params: &[],
        body: Some("IntentSpec"),
        returns: &[
            "valid",
            "entries",
            "switches",
            "expected_effect",
            "would_be",
        ],
    },
    RouteDoc {
        method: "get",
        path: "/v1/intents/switches",
        summary: "The switches the drivers serve: driver, reachability, entries kplane installed, epoch",
        role: Role::Viewer,
        params: &[],
        body: None,
        returns: &["switches"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/intents/policy",
        summary: "Which recommended intent kinds are applied without an admin's approval",
        role: Role::Viewer,
        params: &[],
        body: None,
        returns: &["auto-apply"],
    },
    RouteDoc {
        method: "put",
        path: "/v1/intents/policy",
        summary: "Set the policy: {\"auto-apply\": [kinds]}",
        role: Role::Admin,
        params: &[],
        body: Some("Policy"),
        returns: &["auto-apply"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/intents/{id}",
        summary: "One intent",
        role: Role::Viewer,
        params: &[p("id", "string", "intent id, e.g. i-000001")],
        body: None,
        returns: &[
            "id",
            "spec",
            "state",
            "entries",
            "switches",
            "expected_effect",
            "evidence",
        ],
    },
    RouteDoc {
        method: "delete",
        path: "/v1/intents/{id}",
        summary: "Delete an intent: its entries are removed from the switches",
        role: Role::Operator,
        params: &[p("id", "string", "intent id")],
        body: None,
        returns: &["id", "state"],
    },
    RouteDoc {
        method: "post",
        path: "/v1/intents/{id}/approve",
        summary: "Approve a pending recommendation: checked again, then applied",
        role: Role::Admin,
        params: &[p("id", "string", "intent id")],
        body: None,
        returns: &["id", "state", "approved_by"],
    },
    RouteDoc {
        method: "get",
        path: "/v1/audit",
        summary: "The audit log, newest first: who did what to which intent, when, with what result",
        role: Role::Viewer,
        params: &[
            q("intent", "string", "only this intent"),
            q(
                "actor",
                "string",
                "only this actor (a token name, or kplane)",
            ),
            q("limit", "integer", "records, 1..10000 (default 100)"),
        ],
        body: None,
        returns: &["audit"],
    },
];

/// The document served at `/openapi.json`.
pub fn document() -> Value {
    let mut paths = Map::new();
    for r in ROUTES {
        let params: Vec<Value> = r
            .params
            .iter()
            .map(|p| {
                json!({
                    "name": p.name,
                    "in": p.location,
                    "required": p.location == "path",
                    "description": p.description,
                    "schema": { "type": p.schema },
                })
            })
            .collect();
        let ok = if r.returns == ["text/event-stream"] {
            json!({ "description": "an event stream", "content": { "text/event-stream": {} } })
        } else {
            let props: Map<String, Value> = r
                .returns
                .iter()
                .map(|k| (k.to_string(), json!({})))
                .collect();
            json!({
                "description": "OK",
                "content": { "application/json": { "schema": { "type": "object", "properties": props } } }
            })
        };
        let error = |d: &str| json!({ "description": d, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } });
        let mut op = json!({
            "summary": r.summary,
            "description": format!("Role: {} or above.", r.role.as_str()),
            "parameters": params,
            "security": [ { "bearer": [] } ],
            "responses": {
                "200": ok,
                "400": error("bad parameters"),
                "401": error("missing or unknown token"),
                "403": error("the token's role is too low"),
                "500": error("internal error (details in the server log)"),
            },
        });
        if let Some(schema) = r.body {
            op["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
            });
        }
        if r.path == "/v1/query" {
            op["responses"]["429"] =
                error("the token's query-rate or query-concurrency is spent (Retry-After)");
            op["responses"]["422"] =
                error("the query failed, needed too much memory, or ended its worker process");
        } else if r.path.starts_with("/v1/intents") && r.method != "get" {
            op["responses"]["429"] = error("the token's intent-rate is spent (Retry-After)");
        }
        if r.path == "/v1/query" || r.method == "get" {
            op["responses"]["504"] = error("the answer took longer than query-timeout");
        }
        if r.path.starts_with("/v1/intents") {
            op["responses"]["404"] = error("no such intent");
            op["responses"]["409"] =
                error("a conflict with another intent (named), or a state that does not allow it");
            op["responses"]["422"] =
                error("an invalid intent: the field, table or switch at fault is named");
            op["responses"]["503"] =
                error("no switch known yet (no driver configured or reachable)");
        } else if r.path.contains('{') {
            op["responses"]["404"] = error("nothing there in that time range");
        }
        paths
            .entry(r.path.to_string())
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|o| o.insert(r.method.to_string(), op));
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "kplane intent API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Flow analytics over In-band Network Telemetry. Errors are {\"error\": \"…\"}.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "Error": { "type": "object", "required": ["error"],
                    "properties": { "error": { "type": "string" } } },
                "ProbeStatus": { "type": "object", "additionalProperties": false,
                    "properties": {
                        "session": { "type": "integer", "minimum": 0 },
                        "unavailable": { "type": "array", "items": { "$ref": "#/components/schemas/ProbeFinding" } },
                        "available": { "type": "array", "items": { "$ref": "#/components/schemas/ProbeFinding" } },
                        "congested": { "type": "array", "items": { "type": "object", "required": ["link", "queue_depth"], "additionalProperties": false,
                            "properties": {
                                "link": { "type": "array", "items": { "type": "integer", "minimum": 0, "maximum": 4294967295u64 }, "minItems": 2, "maxItems": 2 },
                                "queue_depth": { "type": "integer", "minimum": 0, "maximum": 4294967295u64 } } } } } },
                "ProbeFinding": { "type": "object", "additionalProperties": false, "description": "{\"link\": [a, b]} or {\"switch\": s}",
                    "properties": {
                        "link": { "type": "array", "items": { "type": "integer", "minimum": 0, "maximum": 4294967295u64 }, "minItems": 2, "maxItems": 2 },
                        "switch": { "type": "integer", "minimum": 0, "maximum": 4294967295u64 } } },
                "Query": { "type": "object", "required": ["sql"],
                    "properties": { "sql": { "type": "string" } } },
                "Policy": { "type": "object", "required": ["auto-apply"],
                    "properties": { "auto-apply": { "type": "array", "items": { "type": "string", "enum": ["monitor", "block", "reroute", "tune", "int-label", "label-frequency"] } } } },
                "FlowMatch": { "type": "object", "description": "a missing field matches anything",
                    "properties": {
                        "src": { "type": "string", "description": "IPv4 address or prefix" },
                        "dst": { "type": "string" },
                        "protocol": { "type": "string", "description": "tcp, udp, icmp or a number" },
                        "src-port": { "oneOf": [{ "type": "string" }, { "type": "integer" }], "description": "80 or 1000-2000" },
                        "dst-port": { "oneOf": [{ "type": "string" }, { "type": "integer" }] } } },
                "Detection": { "type": "object", "required": ["algorithm"],
                    "properties": {
                        "algorithm": { "type": "string", "enum": ["per-hop", "per-flow", "ewma", "complex", "noop"] },
                        "measurement": { "type": "string", "enum": ["hop-latency", "queue-occupancy", "tx-utilization"] },
                        "threshold": { "type": "integer" },
                        "weight": { "type": "number", "description": "EWMA weight of the new value, 0-1" },
                        "when": { "type": "array", "minItems": 1, "maxItems": 4, "description": "complex: 1-4 conditions that must all hold",
                            "items": { "type": "object",
                                "properties": {
                                    "measurement": { "type": "string", "enum": ["hop-latency", "queue-occupancy", "tx-utilization"] },
                                    "above": { "type": "integer" },
                                    "below": { "type": "integer" },
                                    "rises-by": { "type": "integer", "description": "risen by more than this since the flow's previous packet" } } } } } },
                "IntentSpec": { "type": "object", "required": ["kind"],
                    "description": "docs/intents.md; fields of another kind are refused",
                    "properties": {
                        "kind": { "type": "string", "enum": ["monitor", "block", "reroute", "tune", "int-label", "label-frequency", "probe-plan"] },
                        "match": { "$ref": "#/components/schemas/FlowMatch" },
                        "instructions": { "type": "integer", "description": "monitor: INT instruction bitmap (default 65280 = 0xFF00)" },
                        "max-hops": { "type": "integer", "description": "monitor: 1-16 (default 8; 5 with int-label); int-label: MAX_hop 1-5 (default 5)" },
                        "int-label": { "type": "boolean", "description": "monitor: INT-label specific-flow telemetry instead of INT-MD (every labelling port labels the flow)" },
                        "detection": { "$ref": "#/components/schemas/Detection" },
                        "dst": { "type": "string", "description": "reroute: destination prefix" },
                        "avoid": { "type": "object", "description": "reroute: {\"switch\": id}, {\"link\": [a, b]}, {\"links\": [[a, b], ...]} or several of these" },
                        "ports": { "type": "array", "items": { "type": "integer" }, "description": "int-label, label-frequency: egress ports 0-511 (int-label: absent = every port the topology knows)" },
                        "interval": { "type": "string", "description": "int-label: the labelling interval T, 1µs-4.29s (default 100ms)" },
                        "algorithm": { "type": "string", "enum": ["base-a", "base-b"], "description": "int-label (default base-a)" },
                        "function": { "type": "string", "enum": ["f1", "f2", "f3"], "description": "int-label, Base B's labelling probability (default f1)" },
                        "rest": { "type": "string", "description": "int-label, Base B's rest time T1 (default 0)" },
                        "shift": { "type": "integer", "description": "label-frequency: Pro's S, the interval becomes T / 2^S (0-16)" },
                        "planner": { "type": "string", "enum": ["gpint-2", "gpint-3", "gpint-5", "euler"], "description": "probe-plan: the path planner (default gpint-3)" },
                        "measure": { "type": "string", "enum": ["rule-hits", "port-packets"], "description": "probe-plan: what each switch measures (default rule-hits)" },
                        "switches": { "type": "array", "items": { "type": "integer" }, "description": "scope; absent: derived from the topology" },
                        "priority": { "type": "integer", "description": "1-65535 (default 100)" },
                        "ttl": { "type": "string", "description": "e.g. 10m; absent: until deleted" },
                        "owner": { "type": "string" },
                        "reason": { "type": "string" },
                        "origin": { "type": "string", "enum": ["operator", "recommendation"] } } }
            },
        },
    })
}
