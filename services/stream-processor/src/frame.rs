//! Bus batches → the window-input tables the analytics query.
//!
//! * `reports`: one row per report with its event time, the monitored packet's length, and
//!   per-report derived columns —
//!   the node path (`List<UInt32>`), end-to-end latency as the sum of hop latencies, and
//!   transit time as the last hop's egress minus the first hop's ingress timestamp;
//! * `hops`: one row per (report, hop), the flow key repeated (what per-hop latency, queue and
//!   link analytics group by);
//! * `events`: the collector's event rows, narrowed to what the window counts and the loss
//!   detector need.
//!
//! This is a reshaping of columns (Arrow `take` over the hop list offsets), not analytics:
//! every aggregate is a DataFusion query (`analytics.rs`).

use std::sync::{Arc, LazyLock};

use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, ListArray, PrimitiveArray, RecordBatch,
    TimestampNanosecondArray, UInt8Array, UInt32Array, UInt64Array,
};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};
use kplane_model::schema::{col, flow_fields, hop_field_type};
use kplane_model::{FlowHashKey, HopField, ReportFlags};

/// Columns added by the processor.
pub mod pcol {
    pub const EVENT_TIME: &str = "event_time";
    pub const INTERMEDIATE: &str = "intermediate";
    pub const E2E_LATENCY: &str = "e2e_latency_ns";
    pub const TRANSIT: &str = "transit_ns";
    pub const NEXT_NODE: &str = "next_node_id";
    pub const PATH_ID: &str = "path_id";
    pub const FLOW_ID: &str = "flow_id";
    pub const FLOW_NODE_ID: &str = "flow_node_id";
}

/// Hop fields kept in the `hops` table: what the hop, queue and link analytics and the
/// detectors read (zero-copy slices of the bus batch).
pub const HOP_COLUMNS: [HopField; 6] = [
    HopField::NodeId,
    HopField::L1EgressPort,
    HopField::HopLatency,
    HopField::QueueId,
    HopField::QueueOccupancy,
    HopField::TxUtilization,
];

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

const FLOW_COLUMNS: [&str; 5] = [
    col::SRC_IP,
    col::DST_IP,
    col::SRC_PORT,
    col::DST_PORT,
    col::PROTOCOL,
];

static REPORTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut f = vec![
        Field::new(pcol::EVENT_TIME, ts_type(), false),
        Field::new(col::RECEIVED, ts_type(), false),
        Field::new(col::NODE_ID, DataType::UInt32, true),
        Field::new(col::HW_ID, DataType::UInt8, false),
        Field::new(col::SEQUENCE, DataType::UInt32, true),
        Field::new(pcol::INTERMEDIATE, DataType::Boolean, false),
        Field::new(col::PACKET_LENGTH, DataType::UInt32, true),
    ];
    f.extend(flow_fields());
    f.extend([
        Field::new(col::HOP_COUNT, DataType::UInt8, false),
        Field::new(
            col::PATH,
            DataType::List(Arc::new(Field::new("item", DataType::UInt32, true))),
            false,
        ),
        // A hash of `path`: cheap to group and compare (the path itself is a list).
        Field::new(pcol::PATH_ID, DataType::UInt64, false),
        // A hash of the flow 5-tuple (null without one).
        Field::new(pcol::FLOW_ID, DataType::UInt64, true),
        Field::new(pcol::E2E_LATENCY, DataType::UInt64, true),
        Field::new(pcol::TRANSIT, DataType::UInt64, true),
    ]);
    Arc::new(Schema::new(f))
});

static HOPS: LazyLock<SchemaRef> = LazyLock::new(|| {
    // Narrow on purpose: a hop row names its flow by `flow_id` (the 5-tuple is joined back
    // from the window's flows), so reshaping copies 8 bytes per hop rather than 37.
    let mut f = vec![
        Field::new(pcol::EVENT_TIME, ts_type(), false),
        // A hash of the flow 5-tuple (null without one), the report's `flow_id`.
        Field::new(pcol::FLOW_ID, DataType::UInt64, true),
        Field::new(col::HOP_INDEX, DataType::UInt8, false),
    ];
    f.extend(
        HOP_COLUMNS
            .iter()
            .map(|h| Field::new(h.name(), hop_field_type(*h), true)),
    );
    // The node of the next hop on the same report (null at the sink): the link's far end.
    f.push(Field::new(pcol::NEXT_NODE, DataType::UInt32, true));
    // A key for the (flow_id, node_id) pair, null without either: hop latency groups by this
    // one primitive column instead of taking DataFusion's multi-column path for the pair.
    f.push(Field::new(pcol::FLOW_NODE_ID, DataType::UInt64, true));
    Arc::new(Schema::new(f))
});

static EVENTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new(col::RECEIVED, ts_type(), false),
        Field::new(col::KIND, DataType::Utf8, false),
        Field::new(col::METRIC, DataType::Utf8, false),
        Field::new(col::NODE_ID, DataType::UInt32, true),
        Field::new(col::EGRESS_PORT, DataType::UInt32, true),
        Field::new(col::VALUE, DataType::UInt64, true),
        Field::new(col::PREVIOUS, DataType::UInt64, true),
    ]))
});

pub fn reports_schema() -> SchemaRef {
    REPORTS.clone()
}

pub fn hops_schema() -> SchemaRef {
    HOPS.clone()
}

pub fn events_schema() -> SchemaRef {
    EVENTS.clone()
}

/// A bus batch of reports, reshaped.
#[derive(Clone, Debug)]
pub struct ReportFrame {
    pub reports: RecordBatch,
    pub hops: RecordBatch,
    /// Report `i`'s hops are rows `hop_offsets[i]..hop_offsets[i + 1]` of `hops`.
    pub hop_offsets: Vec<u32>,
}

impl ReportFrame {
    /// Event time of each report row, ns.
    pub fn event_ns(&self) -> &[i64] {
        event_times(&self.reports)
    }

    /// Event time of each hop row (its report's), ns.
    pub fn hop_event_ns(&self) -> &[i64] {
        event_times(&self.hops)
    }
}

/// The `event_time` column (always the first) of a frame table.
fn event_times(b: &RecordBatch) -> &[i64] {
    b.column(0)
        .as_primitive::<TimestampNanosecondType>()
        .values()
}

fn column<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef, ArrowError> {
    b.column_by_name(name)
        .ok_or_else(|| ArrowError::SchemaError(format!("no {name} column")))
}

/// A column of `b` by name, as its Arrow array type.
pub(crate) fn col_of<'a, A: Array + 'static>(
    b: &'a RecordBatch,
    name: &str,
) -> Result<&'a A, ArrowError> {
    let a = column(b, name)?;
    a.as_any()
        .downcast_ref::<A>()
        .ok_or_else(|| ArrowError::SchemaError(format!("{name} has type {}", a.data_type())))
}

/// Reshapes one `reports/v1` batch (the collector's `int.reports`); `flow_key` keys the
/// `flow_id` hash.
pub fn report_frame(
    b: &RecordBatch,
    report_clock: bool,
    flow_key: &FlowHashKey,
) -> Result<ReportFrame, ArrowError> {
    let n = b.num_rows();
    let received: &TimestampNanosecondArray = col_of(b, col::RECEIVED)?;
    let stamp: &UInt64Array = col_of(b, col::TIMESTAMP_NS)?;
    let flags: &UInt8Array = col_of(b, col::FLAGS)?;
    let event_ns: Vec<i64> = (0..n)
        .map(|i| {
            if report_clock && stamp.is_valid(i) {
                stamp.value(i) as i64
            } else {
                received.value(i)
            }
        })
        .collect();
    let intermediate =
        Arc::new(BooleanArray::from_iter((0..n).map(|i| {
            Some(ReportFlags(flags.value(i)).contains(ReportFlags::INTERMEDIATE))
        }))) as ArrayRef;

    let hops = column(b, col::HOPS)?
        .as_list_opt::<i32>()
        .ok_or_else(|| ArrowError::SchemaError("hops is not a List".into()))?;
    let values = hops
        .values()
        .as_struct_opt()
        .ok_or_else(|| ArrowError::SchemaError("hops items are not a Struct".into()))?;
    let offsets = hops.value_offsets();
    let (lo, hi) = (offsets[0] as usize, offsets[n] as usize);
    let field = |h: HopField| -> Result<ArrayRef, ArrowError> {
        Ok(values
            .column_by_name(h.name())
            .ok_or_else(|| ArrowError::SchemaError(format!("no hop field {}", h.name())))?
            .slice(lo, hi - lo))
    };
    let node = field(HopField::NodeId)?;
    let node = node.as_primitive::<UInt32Type>();
    let latency = field(HopField::HopLatency)?;
    let latency = latency.as_primitive::<UInt32Type>();
    // Read for the transit time, not kept in `hops`.
    let ingress = field(HopField::IngressTimestamp)?;
    let ingress = ingress.as_primitive::<UInt64Type>();
    let egress = field(HopField::EgressTimestamp)?;
    let egress = egress.as_primitive::<UInt64Type>();

    let flow_ids = flow_ids(b, flow_key)?;
    let hop_rows = hi - lo;
    let bounds = |i: usize| (offsets[i] as usize - lo, offsets[i + 1] as usize - lo);
    let (nodes, latencies) = (node.values(), latency.values());
    let (all_nodes, all_latencies) = (node.null_count() == 0, latency.null_count() == 0);

    // Per report: path (node ids in order), its hash, the latency sum and the transit time.
    // Plain vectors, not Arrow builders: a builder's append is an out-of-line call per value.
    let mut path_nodes = Vec::with_capacity(hop_rows);
    let mut path_offsets = Vec::with_capacity(n + 1);
    path_offsets.push(0i32);
    let mut path_id = Vec::with_capacity(n);
    let mut e2e = Nullable::<UInt64Type>::with_capacity(n);
    let mut transit = Nullable::<UInt64Type>::with_capacity(n);
    for i in 0..n {
        let (a, z) = bounds(i);
        let mut h = WordHash::new();
        if all_nodes {
            path_nodes.extend_from_slice(&nodes[a..z]);
        } else {
            path_nodes.extend((a..z).filter(|&j| node.is_valid(j)).map(|j| nodes[j]));
        }
        for &v in &path_nodes[path_offsets[i] as usize..] {
            h.add(u64::from(v));
        }
        path_offsets.push(path_nodes.len() as i32);
        path_id.push(h.finish());
        let valid_latencies = (a..z).filter(|&j| all_latencies || latency.is_valid(j));
        let sum = valid_latencies.fold(None, |s: Option<u64>, j| {
            Some(s.unwrap_or(0) + u64::from(latencies[j]))
        });
        e2e.push(sum);
        transit.push(if z > a && ingress.is_valid(a) && egress.is_valid(z - 1) {
            egress.value(z - 1).checked_sub(ingress.value(a))
        } else {
            None
        });
    }

    // Per hop, a column at a time: the report's event time and flow, the hop's index on the
    // path, the next hop's node (the link's far end) and the (flow, node) key.
    let mut hop_time = Vec::with_capacity(hop_rows);
    let mut hop_flow = Vec::with_capacity(hop_rows);
    let mut hop_index = Vec::with_capacity(hop_rows);
    let mut has_next = Vec::with_capacity(hop_rows);
    for (i, (&t, &flow)) in event_ns.iter().zip(flow_ids.values()).enumerate() {
        let (a, z) = bounds(i);
        hop_time.extend(std::iter::repeat_n(t, z - a));
        hop_flow.extend(std::iter::repeat_n(flow, z - a));
        hop_index.extend((0..z - a).map(|k| k.min(255) as u8));
        has_next.extend((a..z).map(|j| j + 1 < z));
    }
    // Each hop row is null where its report's flow is.
    let flow_nulls = flow_ids.nulls().map(|reports| {
        NullBuffer::from_iter((0..n).flat_map(|i| {
            let (a, z) = bounds(i);
            std::iter::repeat_n(reports.is_valid(i), z - a)
        }))
    });
    // `flow_id` is a uniform 64-bit hash, so two (flow, node) pairs collide with odds of
    // about 2⁻⁶⁴ per pair of nodes: the same as two flows' ids colliding.
    let flow_node: Vec<u64> = hop_flow
        .iter()
        .zip(nodes)
        .map(|(&f, &v)| f ^ u64::from(v).wrapping_mul(WordHash::K))
        .collect();
    let flow_node_nulls = NullBuffer::union(flow_nulls.as_ref(), node.nulls());
    let mut next_node = Vec::with_capacity(hop_rows);
    next_node.extend_from_slice(nodes.get(1..).unwrap_or_default());
    next_node.truncate(hop_rows);
    next_node.resize(hop_rows, 0);
    if !all_nodes {
        for (j, next) in has_next.iter_mut().enumerate() {
            *next = *next && node.is_valid(j + 1);
        }
    }
    let mut report_cols = vec![
        Arc::new(TimestampNanosecondArray::from(event_ns).with_timezone("UTC")) as ArrayRef,
        column(b, col::RECEIVED)?.clone(),
        column(b, col::NODE_ID)?.clone(),
        column(b, col::HW_ID)?.clone(),
        column(b, col::SEQUENCE)?.clone(),
        intermediate,
        column(b, col::PACKET_LENGTH)?.clone(),
    ];
    for c in FLOW_COLUMNS {
        report_cols.push(column(b, c)?.clone());
    }
    report_cols.extend([
        column(b, col::HOP_COUNT)?.clone(),
        Arc::new(ListArray::try_new(
            Arc::new(Field::new("item", DataType::UInt32, true)),
            OffsetBuffer::new(ScalarBuffer::from(path_offsets)),
            Arc::new(UInt32Array::from(path_nodes)),
            None,
        )?) as ArrayRef,
        Arc::new(UInt64Array::from(path_id)) as ArrayRef,
        Arc::new(flow_ids.clone()) as ArrayRef,
        e2e.finish(),
        transit.finish(),
    ]);
    let reports = RecordBatch::try_new(reports_schema(), report_cols)?;

    let mut hop_cols: Vec<ArrayRef> = vec![
        Arc::new(TimestampNanosecondArray::from(hop_time).with_timezone("UTC")),
        Arc::new(UInt64Array::new(ScalarBuffer::from(hop_flow), flow_nulls)),
        Arc::new(UInt8Array::from(hop_index)),
    ];
    for h in HOP_COLUMNS {
        hop_cols.push(field(h)?);
    }
    hop_cols.push(Arc::new(UInt32Array::new(
        ScalarBuffer::from(next_node),
        Some(NullBuffer::from(has_next)),
    )));
    hop_cols.push(Arc::new(UInt64Array::new(
        ScalarBuffer::from(flow_node),
        flow_node_nulls,
    )));
    let hops = RecordBatch::try_new(hops_schema(), hop_cols)?;
    let hop_offsets = offsets.iter().map(|&o| (o as usize - lo) as u32).collect();
    Ok(ReportFrame {
        reports,
        hops,
        hop_offsets,
    })
}

/// A nullable column built as plain vectors: `PrimitiveArray::from(Vec<Option<_>>)` goes
/// through a builder, value by value, and was a third of the reshaping time.
struct Nullable<T: ArrowPrimitiveType> {
    values: Vec<T::Native>,
    valid: Vec<bool>,
    nulls: usize,
}

impl<T: ArrowPrimitiveType> Nullable<T> {
    fn with_capacity(n: usize) -> Self {
        Self {
            values: Vec::with_capacity(n),
            valid: Vec::with_capacity(n),
            nulls: 0,
        }
    }

    #[inline]
    fn push(&mut self, v: Option<T::Native>) {
        self.values.push(v.unwrap_or_default());
        self.valid.push(v.is_some());
        self.nulls += usize::from(v.is_none());
    }

    fn finish_array(self) -> PrimitiveArray<T> {
        let nulls = (self.nulls > 0).then(|| NullBuffer::from(self.valid));
        PrimitiveArray::<T>::new(ScalarBuffer::from(self.values), nulls)
    }

    fn finish(self) -> ArrayRef {
        Arc::new(self.finish_array())
    }
}

/// A 64-bit hash of a sequence of words: multiply–rotate per word (one multiply per word on
/// the dependency chain, not one per byte), then a final avalanche.
struct WordHash(u64);

impl WordHash {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, w: u64) {
        self.0 = (self.0 ^ w).wrapping_mul(Self::K).rotate_left(31);
    }

    fn finish(self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h
    }
}

/// Per report: the keyed hash of its 5-tuple ([`FlowHashKey`]), null without a flow (value 0).
fn flow_ids(b: &RecordBatch, key: &FlowHashKey) -> Result<UInt64Array, ArrowError> {
    let bad = |n: &str| ArrowError::SchemaError(format!("{n}: unexpected type"));
    let src = column(b, col::SRC_IP)?
        .as_fixed_size_binary_opt()
        .ok_or_else(|| bad(col::SRC_IP))?;
    let dst = column(b, col::DST_IP)?
        .as_fixed_size_binary_opt()
        .ok_or_else(|| bad(col::DST_IP))?;
    let sp = column(b, col::SRC_PORT)?
        .as_primitive_opt::<arrow_array::types::UInt16Type>()
        .ok_or_else(|| bad(col::SRC_PORT))?;
    let dp = column(b, col::DST_PORT)?
        .as_primitive_opt::<arrow_array::types::UInt16Type>()
        .ok_or_else(|| bad(col::DST_PORT))?;
    let pr = column(b, col::PROTOCOL)?
        .as_primitive_opt::<arrow_array::types::UInt8Type>()
        .ok_or_else(|| bad(col::PROTOCOL))?;
    if src.value_length() != 16 || dst.value_length() != 16 {
        return Err(bad("addresses (16 bytes expected)"));
    }
    let bytes16 = |a: &[u8]| <[u8; 16]>::try_from(a).unwrap_or_default();
    // Straight over the value buffers (one 16-byte chunk per address): no per-row bounds
    // checks or offset arithmetic.
    let rows = src
        .value_data()
        .chunks_exact(16)
        .zip(dst.value_data().chunks_exact(16))
        .zip(sp.values().iter().zip(dp.values()).zip(pr.values()));
    let mut ids: Vec<u64> = rows
        .map(|((s, d), ((&sp, &dp), &pr))| key.hash_16(bytes16(s), bytes16(d), sp, dp, pr))
        .collect();
    let nulls = NullBuffer::union(src.nulls(), dst.nulls());
    if let Some(n) = &nulls {
        // A report without a flow: id 0 under the null.
        (0..n.len())
            .filter(|&i| n.is_null(i))
            .for_each(|i| ids[i] = 0);
    }
    Ok(UInt64Array::new(ScalarBuffer::from(ids), nulls))
}

/// Narrows one `events/v1` batch (the collector's `int.events`) to the `events` table; returns
/// it with each row's event time (the collector's receive time).
pub fn event_frame(b: &RecordBatch) -> Result<(RecordBatch, Vec<i64>), ArrowError> {
    let received = column(b, col::RECEIVED)?;
    let times = received
        .as_primitive_opt::<TimestampNanosecondType>()
        .ok_or_else(|| ArrowError::SchemaError("received is not a ns timestamp".into()))?;
    let event_ns = times.values().to_vec();
    let cols = events_schema()
        .fields()
        .iter()
        .map(|f| column(b, f.name()).cloned())
        .collect::<Result<Vec<_>, _>>()?;
    Ok((RecordBatch::try_new(events_schema(), cols)?, event_ns))
}
