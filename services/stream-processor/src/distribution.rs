//! `distribution(x)`: one aggregate for a value's distribution in a group, as a struct
//! `{samples, p50, p99, max}` — the number of non-null values (UInt64) and the exact 50th and
//! 99th percentiles and maximum (Float64, null for a group without values).
//!
//! The percentiles equal DataFusion's `percentile_cont(0.5)` / `percentile_cont(0.99)` (the
//! same linear interpolation between the two nearest ranks, its weight rounded down to 10⁻⁶).
//! Two `percentile_cont` calls beside `count` and `max` keep two copies of every value, each
//! pushed to one of many scattered per-group vectors, and two more accumulators; this keeps one
//! copy, appended to two flat vectors (group, value), sorted by group once at window end.

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

/// Input types read as they are (others are coerced to one of them); values are kept as f64,
/// as `percentile_cont` keeps them.
const INPUT_TYPES: [DataType; 4] = [
    DataType::UInt32,
    DataType::UInt64,
    DataType::Int64,
    DataType::Float64,
];

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

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(RowAccumulator::default()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[values]", args.name),
            DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true))),
            true,
        ))])
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        _args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(GroupsDistribution::default()))
    }
}

/// Calls `f(row, value)` for every non-null value of `a` (one of [`INPUT_TYPES`]) as f64.
fn for_each_value(a: &dyn Array, f: impl FnMut(usize, f64)) -> Result<()> {
    fn each<T: ArrowPrimitiveType>(
        a: &PrimitiveArray<T>,
        to_f64: impl Fn(T::Native) -> f64,
        mut f: impl FnMut(usize, f64),
    ) {
        if a.null_count() == 0 {
            a.values()
                .iter()
                .enumerate()
                .for_each(|(i, &v)| f(i, to_f64(v)));
        } else {
            (0..a.len())
                .filter(|&i| a.is_valid(i))
                .for_each(|i| f(i, to_f64(a.value(i))));
        }
    }
    match a.data_type() {
        DataType::UInt32 => each(a.as_primitive::<UInt32Type>(), f64::from, f),
        DataType::UInt64 => each(a.as_primitive::<UInt64Type>(), |v| v as f64, f),
        DataType::Int64 => each(a.as_primitive::<Int64Type>(), |v| v as f64, f),
        DataType::Float64 => each(a.as_primitive::<Float64Type>(), |v| v, f),
        t => return exec_err!("distribution() of {t}"),
    }
    Ok(())
}

/// The exact percentiles `PERCENTILES` of `values` (reordered in place), as `percentile_cont`
/// computes each. Ascending ranks: once rank k is selected, every larger value lies right of
/// it, so the next selection only searches there.
fn percentiles(values: &mut [f64]) -> [Option<f64>; PERCENTILES.len()] {
    let cmp = |a: &f64, b: &f64| a.total_cmp(b);
    let len = values.len();
    let mut out = [None; PERCENTILES.len()];
    // Values left of `from` are all ≤ every value from it on.
    let mut from = 0;
    for (o, (q, _)) in out.iter_mut().zip(PERCENTILES) {
        if len == 0 {
            break;
        }
        let index = q * (len - 1) as f64;
        let (lower, upper) = (index.floor() as usize, index.ceil() as usize);
        let lo = if lower < from {
            // Already in place (a rank selected before).
            values[lower]
        } else {
            *values[from..].select_nth_unstable_by(lower - from, cmp).1
        };
        from = from.max(lower + 1);
        if lower == upper {
            *o = Some(lo);
            continue;
        }
        // The next rank is the minimum of the values right of `lower`.
        let hi = values[lower + 1..]
            .iter()
            .copied()
            .min_by(cmp)
            .unwrap_or(lo);
        let weight = ((index - lower as f64) * INTERPOLATION_PRECISION) as usize as f64
            / INTERPOLATION_PRECISION;
        *o = Some(lo + (hi - lo) * weight);
    }
    out
}

/// Where each group's values lie in a buffer: (start, len).
type Spans = Vec<(usize, usize)>;

/// One struct row per group (its values at its span of `values`, reordered in place).
fn evaluate_groups(values: &mut [f64], spans: &[(usize, usize)]) -> Result<ArrayRef> {
    let mut samples = Vec::with_capacity(spans.len());
    let mut columns: Vec<Vec<Option<f64>>> =
        vec![Vec::with_capacity(spans.len()); PERCENTILES.len()];
    let mut max = Vec::with_capacity(spans.len());
    for &(start, len) in spans {
        let values = &mut values[start..start + len];
        samples.push(len as u64);
        max.push(values.iter().copied().max_by(f64::total_cmp));
        for (c, p) in columns.iter_mut().zip(percentiles(values)) {
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

/// The list-of-values state of each group (for partial / final aggregation).
fn list_state(values: &[f64], spans: &[(usize, usize)]) -> ArrayRef {
    let mut offsets = vec![0i32];
    let mut flat = Vec::new();
    for &(start, len) in spans {
        flat.extend_from_slice(&values[start..start + len]);
        offsets.push(flat.len() as i32);
    }
    Arc::new(ListArray::new(
        Arc::new(Field::new_list_field(DataType::Float64, true)),
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Arc::new(Float64Array::from(flat)),
        None,
    ))
}

/// Partitions of the (group, value) pairs, by the group's low bits.
const PARTS: usize = 256;

/// Every (group, value) pair of the window so far, appended to one of [`PARTS`] partitions
/// by the group's low bits. Sorting by group at the end is then a counting sort per
/// partition, whose few hundred groups and some thousand values stay in cache; one counting
/// sort over all pairs scattered them across the whole window's values (10 ns a value).
#[derive(Debug)]
struct GroupsDistribution {
    parts: Vec<(Vec<u32>, Vec<f64>)>,
    num_groups: usize,
}

impl Default for GroupsDistribution {
    fn default() -> Self {
        Self {
            parts: vec![(Vec::new(), Vec::new()); PARTS],
            num_groups: 0,
        }
    }
}

impl GroupsDistribution {
    #[inline]
    fn push(&mut self, group: usize, v: f64) {
        let (g, x) = &mut self.parts[group % PARTS];
        g.push(group as u32);
        x.push(v);
    }

    /// Splits off the groups `emit_to` asks for: their values laid out group by group, and
    /// each one's span; the groups after them are renumbered from 0.
    fn take(&mut self, emit_to: EmitTo) -> (Vec<f64>, Spans) {
        let n = match emit_to {
            EmitTo::All => self.num_groups,
            EmitTo::First(k) => k.min(self.num_groups),
        };
        let total = self.parts.iter().map(|(g, _)| g.len()).sum();
        let mut sorted = Vec::with_capacity(total);
        let mut spans = vec![(0, 0); n];
        let mut kept = Self {
            num_groups: self.num_groups - n,
            ..Self::default()
        };
        for (p, (groups, values)) in std::mem::take(&mut self.parts).into_iter().enumerate() {
            // This partition's groups below `n` are p, p + PARTS, …: local index g / PARTS.
            let local = n.saturating_sub(p).div_ceil(PARTS);
            let mut offsets = vec![0usize; local + 1];
            for &g in &groups {
                if (g as usize) < n {
                    offsets[g as usize / PARTS + 1] += 1;
                }
            }
            for i in 0..local {
                offsets[i + 1] += offsets[i];
            }
            let base = sorted.len();
            sorted.resize(base + offsets[local], 0.0);
            let mut next = offsets.clone();
            for (&g, &v) in groups.iter().zip(&values) {
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

impl GroupsAccumulator for GroupsDistribution {
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
        let lists = values[0].as_list::<i32>();
        for (i, &g) in group_indices.iter().enumerate() {
            if lists.is_valid(i) {
                let l = lists.value(i);
                for x in l.as_primitive::<Float64Type>().iter().flatten() {
                    self.push(g, x);
                }
            }
        }
        Ok(())
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        // Each row its own group: a list of its value, empty when null or filtered out.
        let mut rows: Vec<Vec<f64>> = vec![Vec::new(); values[0].len()];
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
            .map(|(g, v)| g.capacity() * size_of::<u32>() + v.capacity() * size_of::<f64>())
            .sum()
    }
}

/// The accumulator of an aggregate without GROUP BY.
#[derive(Debug, Default)]
struct RowAccumulator {
    values: Vec<f64>,
}

impl Accumulator for RowAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for_each_value(values[0].as_ref(), |_, x| self.values.push(x))
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let span = [(0, self.values.len())];
        let row = evaluate_groups(&mut self.values, &span)?;
        ScalarValue::try_from_array(&row, 0)
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.values.capacity() * size_of::<f64>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let list = list_state(&self.values, &[(0, self.values.len())]);
        Ok(vec![ScalarValue::try_from_array(&list, 0)?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = states[0].as_list::<i32>();
        for l in lists.iter().flatten() {
            self.values
                .extend(l.as_primitive::<Float64Type>().iter().flatten());
        }
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
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
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
        for by in ["GROUP BY g ORDER BY g", ""] {
            let ours = rows(
                &ctx,
                &format!(
                    "SELECT distribution(v)['samples'], distribution(v)['p50'], \
                     distribution(v)['p99'], distribution(v)['max'] FROM t {by}"
                ),
            )
            .await;
            let theirs = rows(
                &ctx,
                &format!(
                    "SELECT count(v), percentile_cont(0.5) WITHIN GROUP (ORDER BY v), \
                     percentile_cont(0.99) WITHIN GROUP (ORDER BY v), max(v) FROM t {by}"
                ),
            )
            .await;
            assert!(!ours.is_empty());
            assert_eq!(ours, theirs, "{by}");
        }
    }

    #[test]
    fn emitting_the_first_groups_keeps_the_rest() {
        let mut acc = GroupsDistribution::default();
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
