//! `p50_p99(x)`: the exact 50th and 99th percentiles of `x` in one aggregate, as a struct
//! `{p50, p99}` (Float64, null for a group without values).
//!
//! The values equal DataFusion's `percentile_cont(0.5)` / `percentile_cont(0.99)` (the same
//! linear interpolation between the two nearest ranks, with its interpolation weight rounded
//! down to 10⁻⁶). Two `percentile_cont` calls each keep a copy of every value in a vector per
//! group, pushed in row order to scattered vectors; this one keeps one copy, appended to two
//! flat vectors (group, value), and sorts it by group once when the window is evaluated.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::{Array, ArrayRef, BooleanArray, Float64Array, ListArray, StructArray};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields};
use datafusion::common::types::NativeType;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Coercion, EmitTo, GroupsAccumulator, Signature,
    TypeSignatureClass, Volatility,
};

/// The percentiles computed and their output field names.
const QUANTILES: [(f64, &str); 2] = [(0.5, "p50"), (0.99, "p99")];

/// Same as DataFusion's `percentile_cont`: the interpolation weight's resolution.
const INTERPOLATION_PRECISION: f64 = 1_000_000.0;

/// The `p50_p99` aggregate function.
pub fn p50_p99_udaf() -> AggregateUDF {
    AggregateUDF::from(P50P99::default())
}

fn output_fields() -> Fields {
    QUANTILES
        .iter()
        .map(|(_, name)| Field::new(*name, DataType::Float64, true))
        .collect()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct P50P99 {
    signature: Signature,
}

impl Default for P50P99 {
    fn default() -> Self {
        Self {
            // Any numeric argument, cast to Float64 (as `percentile_cont` does).
            signature: Signature::coercible(
                vec![Coercion::new_implicit(
                    TypeSignatureClass::Float,
                    vec![TypeSignatureClass::Numeric],
                    NativeType::Float64,
                )],
                Volatility::Immutable,
            ),
        }
    }
}

impl AggregateUDFImpl for P50P99 {
    fn name(&self) -> &str {
        "p50_p99"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(output_fields()))
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
        Ok(Box::new(GroupsQuantiles::default()))
    }
}

/// The exact percentile `q` of `values` (reordered in place), as `percentile_cont` computes it.
fn percentile(values: &mut [f64], q: f64) -> Option<f64> {
    let cmp = |a: &f64, b: &f64| a.total_cmp(b);
    match values.len() {
        0 => None,
        1 => Some(values[0]),
        len => {
            let index = q * (len - 1) as f64;
            let (lower, upper) = (index.floor() as usize, index.ceil() as usize);
            let lo = *values.select_nth_unstable_by(lower, cmp).1;
            if lower == upper {
                return Some(lo);
            }
            // Every value above `lower` is now right of it: the next rank is their minimum.
            let hi = values[lower + 1..]
                .iter()
                .copied()
                .min_by(cmp)
                .unwrap_or(lo);
            let weight = ((index - lower as f64) * INTERPOLATION_PRECISION) as usize as f64
                / INTERPOLATION_PRECISION;
            Some(lo + (hi - lo) * weight)
        }
    }
}

/// One struct row per group of `values`, each group's values reordered in place.
fn evaluate_groups<'a>(groups: impl Iterator<Item = &'a mut [f64]>) -> Result<ArrayRef> {
    let mut columns: Vec<Vec<Option<f64>>> = vec![Vec::new(); QUANTILES.len()];
    for values in groups {
        // Ascending percentiles: each selection narrows the next one's slice.
        for (c, (q, _)) in columns.iter_mut().zip(QUANTILES) {
            c.push(percentile(values, q));
        }
    }
    let arrays: Vec<ArrayRef> = columns
        .into_iter()
        .map(|c| Arc::new(Float64Array::from(c)) as ArrayRef)
        .collect();
    Ok(Arc::new(StructArray::try_new(
        output_fields(),
        arrays,
        None,
    )?))
}

/// The list-of-values state of each group (for partial / final aggregation).
fn list_state<'a>(groups: impl Iterator<Item = &'a [f64]>) -> ArrayRef {
    let mut offsets = vec![0i32];
    let mut flat = Vec::new();
    for g in groups {
        flat.extend_from_slice(g);
        offsets.push(flat.len() as i32);
    }
    Arc::new(ListArray::new(
        Arc::new(Field::new_list_field(DataType::Float64, true)),
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Arc::new(Float64Array::from(flat)),
        None,
    ))
}

/// Every (group, value) pair of the window so far, in arrival order.
#[derive(Debug, Default)]
struct GroupsQuantiles {
    groups: Vec<u32>,
    values: Vec<f64>,
    num_groups: usize,
}

impl GroupsQuantiles {
    fn push(&mut self, group: usize, v: f64) {
        self.groups.push(group as u32);
        self.values.push(v);
    }

    /// Sorts the pairs by group (counting sort) and splits off the groups `emit_to` asks
    /// for: their values laid out group after group, and each one's offsets.
    fn take(&mut self, emit_to: EmitTo) -> (Vec<f64>, Vec<usize>) {
        let n = match emit_to {
            EmitTo::All => self.num_groups,
            EmitTo::First(k) => k.min(self.num_groups),
        };
        let mut offsets = vec![0usize; n + 1];
        for &g in &self.groups {
            if (g as usize) < n {
                offsets[g as usize + 1] += 1;
            }
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut sorted = vec![0f64; offsets[n]];
        let mut next = offsets.clone();
        let (mut kept_groups, mut kept_values) = (Vec::new(), Vec::new());
        for (&g, &v) in self.groups.iter().zip(&self.values) {
            let g = g as usize;
            if g < n {
                sorted[next[g]] = v;
                next[g] += 1;
            } else {
                kept_groups.push((g - n) as u32);
                kept_values.push(v);
            }
        }
        self.groups = kept_groups;
        self.values = kept_values;
        self.num_groups -= n;
        (sorted, offsets)
    }
}

/// `values` split at `offsets` into one mutable slice per group.
fn split_groups<'a>(mut values: &'a mut [f64], offsets: &[usize]) -> Vec<&'a mut [f64]> {
    offsets
        .windows(2)
        .map(|w| {
            let (g, rest) = std::mem::take(&mut values).split_at_mut(w[1] - w[0]);
            values = rest;
            g
        })
        .collect()
}

impl GroupsAccumulator for GroupsQuantiles {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let v = values[0].as_primitive::<Float64Type>();
        self.num_groups = self.num_groups.max(total_num_groups);
        self.groups.reserve(group_indices.len());
        self.values.reserve(group_indices.len());
        let taken = |i: usize| opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i));
        if v.null_count() == 0 && opt_filter.is_none() {
            for (&g, &x) in group_indices.iter().zip(v.values()) {
                self.push(g, x);
            }
        } else {
            for (i, &g) in group_indices.iter().enumerate() {
                if v.is_valid(i) && taken(i) {
                    self.push(g, v.value(i));
                }
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let (mut values, offsets) = self.take(emit_to);
        evaluate_groups(split_groups(&mut values, &offsets).into_iter())
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let (values, offsets) = self.take(emit_to);
        Ok(vec![list_state(
            offsets.windows(2).map(|w| &values[w[0]..w[1]]),
        )])
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
        let v = values[0].as_primitive::<Float64Type>();
        let taken = |i: usize| opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i));
        let rows: Vec<Vec<f64>> = (0..v.len())
            .map(|i| {
                if v.is_valid(i) && taken(i) {
                    vec![v.value(i)]
                } else {
                    Vec::new()
                }
            })
            .collect();
        Ok(vec![list_state(rows.iter().map(Vec::as_slice))])
    }

    fn size(&self) -> usize {
        self.groups.capacity() * size_of::<u32>() + self.values.capacity() * size_of::<f64>()
    }
}

/// The accumulator of an aggregate without GROUP BY.
#[derive(Debug, Default)]
struct RowAccumulator {
    values: Vec<f64>,
}

impl Accumulator for RowAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.values
            .extend(values[0].as_primitive::<Float64Type>().iter().flatten());
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let row = evaluate_groups(std::iter::once(self.values.as_mut_slice()))?;
        ScalarValue::try_from_array(&row, 0)
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.values.capacity() * size_of::<f64>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let list = list_state(std::iter::once(self.values.as_slice()));
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

    /// (group, value) rows: groups of 1 to ~400 values, some nulls, one group all null.
    fn table() -> RecordBatch {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut g, mut v) = (Vec::new(), Vec::new());
        for group in 0..60u32 {
            let n = if group % 7 == 0 { 1 } else { next() % 400 + 2 };
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
    async fn equals_percentile_cont_per_group_and_overall() {
        // Small batches: many update calls per group.
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_batch_size(97));
        ctx.register_udaf(p50_p99_udaf());
        let t = table();
        let mem = MemTable::try_new(t.schema(), vec![vec![t]]).unwrap();
        ctx.register_table("t", Arc::new(mem)).unwrap();
        for by in ["GROUP BY g ORDER BY g", ""] {
            let ours = rows(
                &ctx,
                &format!("SELECT p50_p99(v)['p50'], p50_p99(v)['p99'] FROM t {by}"),
            )
            .await;
            let theirs = rows(
                &ctx,
                &format!(
                    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v), \
                     percentile_cont(0.99) WITHIN GROUP (ORDER BY v) FROM t {by}"
                ),
            )
            .await;
            assert!(!ours.is_empty());
            assert_eq!(ours, theirs, "{by}");
        }
    }

    #[test]
    fn emitting_the_first_groups_keeps_the_rest() {
        let mut acc = GroupsQuantiles::default();
        let values: ArrayRef = Arc::new(Float64Array::from(vec![5.0, 1.0, 9.0, 3.0, 7.0, 2.0]));
        acc.update_batch(&[values], &[0, 1, 2, 0, 1, 2], None, 3)
            .unwrap();
        let first = acc.evaluate(EmitTo::First(1)).unwrap();
        let p50 = first.as_struct().column(0).as_primitive::<Float64Type>();
        assert_eq!(p50.values().as_ref(), &[4.0]);
        let rest = acc.evaluate(EmitTo::All).unwrap();
        let p50 = rest.as_struct().column(0).as_primitive::<Float64Type>();
        assert_eq!(p50.values().as_ref(), &[4.0, 5.5]);
    }
}
