//! `distribution(x)`: one aggregate for a value's distribution in a group, as a struct
//! `{samples, p50, p99, max}` — the number of non-null values (UInt64) and the exact 50th and
//! 99th percentiles and maximum (Float64, null for a group without values).
//!
//! The percentiles equal DataFusion's `percentile_cont(0.5)` / `percentile_cont(0.99)` (the
//! same linear interpolation between the two nearest ranks, its weight rounded down to 10⁻⁶).
//! Two `percentile_cont` calls beside `count` and `max` keep two copies of every value, each
//! pushed to one of many scattered per-group vectors, and two more accumulators; this keeps one
//! copy, in the input's type, appended as (group, value) pairs to flat vectors, sorted by group
//! once at window end.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, Float64Array, ListArray, PrimitiveArray,
    StructArray, UInt64Array,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};

/// The percentiles computed, ascending, and their output field names.
const PERCENTILES: [(f64, &str); 2] = [(0.5, "p50"), (0.99, "p99")];

/// Same as DataFusion's `percentile_cont`: the interpolation weight's resolution.
const INTERPOLATION_PRECISION: f64 = 1_000_000.0;

/// Input types read as they are (others are coerced to one of them) and kept in their own
/// type (see [`Sample`]).
const INPUT_TYPES: [DataType; 4] = [
    DataType::UInt32,
    DataType::UInt64,
    DataType::Int64,
    DataType::Float64,
];

/// The (coerced) input's type: one of [`INPUT_TYPES`].
fn input_type(fields: &[FieldRef]) -> Result<&DataType> {
    match fields {
        [f] if INPUT_TYPES.contains(f.data_type()) => Ok(f.data_type()),
        _ => exec_err!("distribution() takes one argument of {INPUT_TYPES:?}"),
    }
}

/// The `distribution` aggregate function.
pub fn distribution_udaf() -> AggregateUDF {
    AggregateUDF::from(Distribution::default())
}

fn output_fields() -> Fields {
    let mut f = vec![Field::new("samples", DataType::UInt64, false)];
    f.extend(
        PERCENTILES
            .iter()
            .map(|(_, name)| Field::new(*name, DataType::Float64, true)),
    );
    f.push(Field::new("max", DataType::Float64, true));
    f.into()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Distribution {
    signature: Signature,
}

impl Default for Distribution {
    fn default() -> Self {
        Self {
            signature: Signature::uniform(1, INPUT_TYPES.to_vec(), Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for Distribution {
    fn name(&self) -> &str {
        "distribution"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(output_fields()))
    }

    fn is_nullable(&self) -> bool {
        false
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        match input_type(args.expr_fields)? {
            DataType::UInt32 => Ok(Box::new(RowAccumulator::<u32>::default())),
            DataType::UInt64 => Ok(Box::new(RowAccumulator::<u64>::default())),
            DataType::Int64 => Ok(Box::new(RowAccumulator::<i64>::default())),
            _ => Ok(Box::new(RowAccumulator::<f64>::default())),
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[values]", args.name),
            DataType::List(Arc::new(Field::new_list_field(
                input_type(args.input_fields)?.clone(),
                true,
            ))),
            true,
        ))])
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        match input_type(args.expr_fields)? {
            DataType::UInt32 => Ok(Box::new(GroupsDistribution::<u32>::default())),
            DataType::UInt64 => Ok(Box::new(GroupsDistribution::<u64>::default())),
            DataType::Int64 => Ok(Box::new(GroupsDistribution::<i64>::default())),
            _ => Ok(Box::new(GroupsDistribution::<f64>::default())),
        }
    }
}

/// A value type the accumulators keep natively (the input's own type: a hop latency stays a
/// 4-byte `u32`, half the memory of an `f64`, and compares as an integer). Ranks are selected
/// in the native order and only the selected values converted: the same result as converting
/// first, since every conversion to f64 keeps the order.
trait Sample: arrow_buffer::ArrowNativeType + Default {
    type Arrow: ArrowPrimitiveType<Native = Self>;
    fn to_f64(self) -> f64;
    fn order(&self, other: &Self) -> std::cmp::Ordering;
}

macro_rules! integer_sample {
    ($t:ty, $arrow:ty) => {
        impl Sample for $t {
            type Arrow = $arrow;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn order(&self, other: &Self) -> std::cmp::Ordering {
                self.cmp(other)
            }
        }
    };
}
integer_sample!(u32, UInt32Type);
integer_sample!(u64, UInt64Type);
integer_sample!(i64, Int64Type);

impl Sample for f64 {
    type Arrow = Float64Type;
    fn to_f64(self) -> f64 {
        self
    }
    fn order(&self, other: &Self) -> std::cmp::Ordering {
        self.total_cmp(other)
    }
}

/// Calls `f(row, value)` for every non-null value of `a`, whose type is `S`'s.
fn for_each_value<S: Sample>(a: &dyn Array, mut f: impl FnMut(usize, S)) -> Result<()> {
    let Some(a) = a.as_primitive_opt::<S::Arrow>() else {
        return exec_err!(
            "distribution() of {} read as {:?}",
            a.data_type(),
            S::Arrow::DATA_TYPE
        );
    };
    if a.null_count() == 0 {
        a.values().iter().enumerate().for_each(|(i, &v)| f(i, v));
    } else {
        (0..a.len())
            .filter(|&i| a.is_valid(i))
            .for_each(|i| f(i, a.value(i)));
    }
    Ok(())
}

/// Summary of one group's values (reordered in place): the exact percentiles `PERCENTILES`,
/// as `percentile_cont` computes each, and the maximum. Ascending ranks: once rank k is
/// selected, every larger value lies right of it, so the next selection — and finally the
/// maximum — only searches there.
fn summarize<S: Sample>(values: &mut [S]) -> ([Option<f64>; PERCENTILES.len()], Option<f64>) {
    let len = values.len();
    let mut out = [None; PERCENTILES.len()];
    if len == 0 {
        return (out, None);
    }
    // Values left of `from` are all ≤ every value from it on.
    let mut from = 0;
    for (o, (q, _)) in out.iter_mut().zip(PERCENTILES) {
        let index = q * (len - 1) as f64;
        let (lower, upper) = (index.floor() as usize, index.ceil() as usize);
        let lo = if lower < from {
            // Already in place (a rank selected before).
            values[lower]
        } else {
            *values[from..]
                .select_nth_unstable_by(lower - from, S::order)
                .1
        };
        from = from.max(lower + 1);
        if lower == upper {
            *o = Some(lo.to_f64());
            continue;
        }
        // The next rank is the minimum of the values right of `lower`.
        let hi = values[lower + 1..]
            .iter()
            .copied()
            .min_by(S::order)
            .unwrap_or(lo);
        let (lo, hi) = (lo.to_f64(), hi.to_f64());
        let weight = ((index - lower as f64) * INTERPOLATION_PRECISION) as usize as f64
            / INTERPOLATION_PRECISION;
        *o = Some(lo + (hi - lo) * weight);
    }
    // The last selected rank and everything right of it hold the maximum.
    let max = values[from - 1..].iter().copied().max_by(S::order);
    (out, max.map(S::to_f64))
}

/// Where each group's values lie in a buffer: (start, len).
type Spans = Vec<(usize, usize)>;

/// One struct row per group (its values at its span of `values`, reordered in place).
fn evaluate_groups<S: Sample>(values: &mut [S], spans: &[(usize, usize)]) -> Result<ArrayRef> {
    let mut samples = Vec::with_capacity(spans.len());
    let mut columns: Vec<Vec<Option<f64>>> =
        vec![Vec::with_capacity(spans.len()); PERCENTILES.len()];
    let mut max = Vec::with_capacity(spans.len());
    for &(start, len) in spans {
        let (percentiles, m) = summarize(&mut values[start..start + len]);
        samples.push(len as u64);
        max.push(m);
        for (c, p) in columns.iter_mut().zip(percentiles) {
            c.push(p);
        }
    }
    let mut arrays: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(samples))];
    arrays.extend(
        columns
            .into_iter()
            .map(|c| Arc::new(Float64Array::from(c)) as ArrayRef),
    );
    arrays.push(Arc::new(Float64Array::from(max)));
    Ok(Arc::new(StructArray::try_new(
        output_fields(),
        arrays,
        None,
    )?))
}

/// The list-of-values state of each group (for partial / final aggregation), in the
/// input's type.
fn list_state<S: Sample>(values: &[S], spans: &[(usize, usize)]) -> ArrayRef {
    let mut offsets = vec![0i32];
    let mut flat = Vec::new();
    for &(start, len) in spans {
        flat.extend_from_slice(&values[start..start + len]);
        offsets.push(flat.len() as i32);
    }
    Arc::new(ListArray::new(
        Arc::new(Field::new_list_field(S::Arrow::DATA_TYPE, true)),
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Arc::new(PrimitiveArray::<S::Arrow>::from_iter_values(flat)),
        None,
    ))
}

/// Calls `f` with every value of every valid list in `states` (the input's type) and the
/// row it came from.
fn for_each_state_value<S: Sample>(states: &ArrayRef, mut f: impl FnMut(usize, S)) {
    let lists = states.as_list::<i32>();
    for i in 0..lists.len() {
        if lists.is_valid(i) {
            let l = lists.value(i);
            let l = l.as_primitive::<S::Arrow>();
            (0..l.len())
                .filter(|&j| l.is_valid(j))
                .for_each(|j| f(i, l.value(j)));
        }
    }
}

/// Partitions of the (group, value) pairs, by the group's low bits.
const PARTS: usize = 256;

/// Every (group, value) pair of the window so far, appended to one of [`PARTS`] partitions
/// by the group's low bits. Sorting by group at the end is then a counting sort per
/// partition, whose few hundred groups and some thousand values stay in cache; one counting
/// sort over all pairs scattered them across the whole window's values (10 ns a value).
/// A pair is one element (8 bytes for a `u32` input): one write stream per partition.
#[derive(Debug)]
struct GroupsDistribution<S> {
    parts: Vec<Vec<(u32, S)>>,
    num_groups: usize,
}

impl<S: Sample> Default for GroupsDistribution<S> {
    fn default() -> Self {
        Self {
            parts: vec![Vec::new(); PARTS],
            num_groups: 0,
        }
    }
}

impl<S: Sample> GroupsDistribution<S> {
    #[inline]
    fn push(&mut self, group: usize, v: S) {
        self.parts[group % PARTS].push((group as u32, v));
    }

    /// Splits off the groups `emit_to` asks for: their values laid out group by group, and
    /// each one's span; the groups after them are renumbered from 0.
    fn take(&mut self, emit_to: EmitTo) -> (Vec<S>, Spans) {
        let n = match emit_to {
            EmitTo::All => self.num_groups,
            EmitTo::First(k) => k.min(self.num_groups),
        };
        let total = self.parts.iter().map(Vec::len).sum();
        let mut sorted = Vec::with_capacity(total);
        let mut spans = vec![(0, 0); n];
        let mut kept = Self {
            num_groups: self.num_groups - n,
            ..Self::default()
        };
        for (p, pairs) in std::mem::take(&mut self.parts).into_iter().enumerate() {
            // This partition's groups below `n` are p, p + PARTS, …: local index g / PARTS.
            let local = n.saturating_sub(p).div_ceil(PARTS);
            let mut offsets = vec![0usize; local + 1];
            for &(g, _) in &pairs {
                if (g as usize) < n {
                    offsets[g as usize / PARTS + 1] += 1;
                }
            }
            for i in 0..local {
                offsets[i + 1] += offsets[i];
            }
            let base = sorted.len();
            sorted.resize(base + offsets[local], S::default());
            let mut next = offsets.clone();
            for (g, v) in pairs {
                let g = g as usize;
                if g < n {
                    sorted[base + next[g / PARTS]] = v;
                    next[g / PARTS] += 1;
                } else {
                    kept.push(g - n, v);
                }
            }
            for l in 0..local {
                spans[l * PARTS + p] = (base + offsets[l], offsets[l + 1] - offsets[l]);
            }
        }
        *self = kept;
        (sorted, spans)
    }
}

impl<S: Sample> GroupsAccumulator for GroupsDistribution<S> {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.num_groups = self.num_groups.max(total_num_groups);
        let taken = |i: usize| opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i));
        for_each_value(values[0].as_ref(), |i, x| {
            if taken(i) {
                self.push(group_indices[i], x);
            }
        })
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let (mut values, spans) = self.take(emit_to);
        evaluate_groups(&mut values, &spans)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let (values, spans) = self.take(emit_to);
        Ok(vec![list_state(&values, &spans)])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.num_groups = self.num_groups.max(total_num_groups);
        for_each_state_value(&values[0], |i, x| self.push(group_indices[i], x));
        Ok(())
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        // Each row its own group: a list of its value, empty when null or filtered out.
        let mut rows: Vec<Vec<S>> = vec![Vec::new(); values[0].len()];
        let taken = |i: usize| opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i));
        for_each_value(values[0].as_ref(), |i, x| {
            if taken(i) {
                rows[i].push(x);
            }
        })?;
        let spans: Spans = rows
            .iter()
            .scan(0, |start, r| {
                let span = (*start, r.len());
                *start += r.len();
                Some(span)
            })
            .collect();
        Ok(vec![list_state(&rows.concat(), &spans)])
    }

    fn size(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.capacity() * size_of::<(u32, S)>())
            .sum()
    }
}

/// The accumulator of an aggregate without GROUP BY.
#[derive(Debug, Default)]
struct RowAccumulator<S> {
    values: Vec<S>,
}

impl<S: Sample> Accumulator for RowAccumulator<S> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for_each_value(values[0].as_ref(), |_, x| self.values.push(x))
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let span = [(0, self.values.len())];
        let row = evaluate_groups(&mut self.values, &span)?;
        ScalarValue::try_from_array(&row, 0)
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.values.capacity() * size_of::<S>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let list = list_state(&self.values, &[(0, self.values.len())]);
        Ok(vec![ScalarValue::try_from_array(&list, 0)?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        for_each_state_value(&states[0], |_, x| self.values.push(x));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{RecordBatch, UInt32Array};
    use arrow_schema::Schema;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// (group, value) rows: groups of 1 to 61 values, some nulls, one group all null.
    fn table() -> RecordBatch {
        let mut rng = kplane_model::rng::Rng::new(1);
        let mut next = move || rng.next_u64();
        let (mut g, mut v) = (Vec::new(), Vec::new());
        // More groups than partitions: groups share a partition.
        for group in 0..700u32 {
            let n = if group % 7 == 0 { 1 } else { next() % 60 + 2 };
            for _ in 0..n {
                g.push(group);
                v.push((group != 13 && next() % 10 != 0).then(|| (next() % 100_000) as u32));
            }
        }
        let schema = Schema::new(vec![
            Field::new("g", DataType::UInt32, false),
            Field::new("v", DataType::UInt32, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(UInt32Array::from(g)),
                Arc::new(UInt32Array::from(v)),
            ],
        )
        .unwrap()
    }

    async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<Option<f64>>> {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let mut out = Vec::new();
        for b in batches {
            for i in 0..b.num_rows() {
                out.push(
                    b.columns()
                        .iter()
                        .map(|c| {
                            let c = arrow_select::take::take(
                                c,
                                &UInt32Array::from(vec![i as u32]),
                                None,
                            )
                            .unwrap();
                            let c =
                                datafusion::arrow::compute::cast(&c, &DataType::Float64).unwrap();
                            let c = c.as_primitive::<Float64Type>();
                            c.is_valid(0).then(|| c.value(0))
                        })
                        .collect(),
                );
            }
        }
        out
    }

    #[tokio::test]
    async fn equals_percentile_cont_count_and_max_per_group_and_overall() {
        // Small batches: many update calls per group.
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_batch_size(97));
        ctx.register_udaf(distribution_udaf());
        let t = table();
        let mem = MemTable::try_new(t.schema(), vec![vec![t]]).unwrap();
        ctx.register_table("t", Arc::new(mem)).unwrap();
        // Each kept type: UInt32 as it is, signed, unsigned 64-bit and floating point.
        let inputs = [
            "v",
            "CAST(v AS BIGINT) - 50000",
            "CAST(v AS BIGINT UNSIGNED) * 4000000000",
            "CAST(v AS DOUBLE) / 7",
        ];
        for (v, by) in inputs
            .iter()
            .flat_map(|v| ["GROUP BY g ORDER BY g", ""].map(|by| (v, by)))
        {
            let ours = rows(
                &ctx,
                &format!(
                    "SELECT distribution(x)['samples'], distribution(x)['p50'], \
                     distribution(x)['p99'], distribution(x)['max'] \
                     FROM (SELECT g, {v} AS x FROM t) {by}"
                ),
            )
            .await;
            let theirs = rows(
                &ctx,
                &format!(
                    "SELECT count(x), percentile_cont(0.5) WITHIN GROUP (ORDER BY x), \
                     percentile_cont(0.99) WITHIN GROUP (ORDER BY x), max(x) \
                     FROM (SELECT g, {v} AS x FROM t) {by}"
                ),
            )
            .await;
            assert!(!ours.is_empty());
            assert_eq!(ours, theirs, "{v} {by}");
        }
    }

    #[test]
    fn emitting_the_first_groups_keeps_the_rest() {
        let mut acc = GroupsDistribution::<f64>::default();
        let values: ArrayRef = Arc::new(Float64Array::from(vec![5.0, 1.0, 9.0, 3.0, 7.0, 2.0]));
        acc.update_batch(&[values], &[0, 1, 2, 0, 1, 2], None, 3)
            .unwrap();
        let first = acc.evaluate(EmitTo::First(1)).unwrap();
        let p50 = first.as_struct().column(1).as_primitive::<Float64Type>();
        assert_eq!(p50.values().as_ref(), &[4.0]);
        let rest = acc.evaluate(EmitTo::All).unwrap();
        let p50 = rest.as_struct().column(1).as_primitive::<Float64Type>();
        assert_eq!(p50.values().as_ref(), &[4.0, 5.5]);
        let max = rest.as_struct().column(3).as_primitive::<Float64Type>();
        assert_eq!(max.values().as_ref(), &[7.0, 9.0]);
    }
}
