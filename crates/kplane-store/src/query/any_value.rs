//! `any_value(x)` with a grouped accumulator, registered in place of DataFusion's in every
//! kplane SQL context. Same result — the first non-null value of each group, in input order —
//! but DataFusion 55 computes it through its per-group adapter, which slices every batch by
//! group (15 ns a row where the `flows` query picks each path's node list). This one keeps,
//! per group, where its value is, and gathers the values once at the end.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, new_null_array};
use arrow_schema::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};

/// The `any_value` aggregate function.
pub fn any_value_udaf() -> AggregateUDF {
    AggregateUDF::from(AnyValue {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct AnyValue {
    signature: Signature,
}

impl AggregateUDFImpl for AnyValue {
    fn name(&self) -> &str {
        "any_value"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(RowAnyValue {
            value: ScalarValue::try_from(args.return_type())?,
        }))
    }

    /// The value so far, null while there is none.
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[any_value]", args.name),
            args.return_type().clone(),
            true,
        ))])
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        AggregateOrderSensitivity::Insensitive
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(GroupsAnyValue {
            data_type: args.return_type().clone(),
            arrays: Vec::new(),
            chosen: Vec::new(),
        }))
    }
}

/// A group without a value yet.
const UNSET: (u32, u32) = (u32::MAX, u32::MAX);

/// Per group, where its value is: (index into `arrays`, row).
#[derive(Debug)]
struct GroupsAnyValue {
    data_type: DataType,
    /// The input arrays a value was chosen from (only those: a batch that gave no group its
    /// value is not kept).
    arrays: Vec<ArrayRef>,
    chosen: Vec<(u32, u32)>,
}

impl GroupsAccumulator for GroupsAnyValue {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.chosen.resize(total_num_groups, UNSET);
        let a = &values[0];
        let index = self.arrays.len() as u32;
        let mut used = false;
        for (row, &g) in group_indices.iter().enumerate() {
            if self.chosen[g] != UNSET
                || a.is_null(row)
                || opt_filter.is_some_and(|f| !(f.is_valid(row) && f.value(row)))
            {
                continue;
            }
            self.chosen[g] = (index, row as u32);
            used = true;
        }
        if used {
            self.arrays.push(a.clone());
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let chosen = emit_to.take_needed(&mut self.chosen);
        let picks = chosen
            .iter()
            .map(|&c| (c != UNSET).then_some((c.0 as usize, c.1 as usize)));
        let out = gather(&self.data_type, &self.arrays, picks)?;
        if self.chosen.is_empty() {
            self.arrays.clear();
        }
        Ok(out)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.evaluate(emit_to)?])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        // A state is a value or null: merged like input.
        self.update_batch(values, group_indices, None, total_num_groups)
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        // Each row its own group: its value, null where filtered out.
        let a = &values[0];
        let Some(f) = opt_filter else {
            return Ok(vec![a.clone()]);
        };
        let picks = (0..a.len()).map(|i| (f.is_valid(i) && f.value(i)).then_some((0, i)));
        Ok(vec![gather(
            &self.data_type,
            std::slice::from_ref(a),
            picks,
        )?])
    }

    fn size(&self) -> usize {
        self.chosen.capacity() * size_of::<(u32, u32)>()
            + self
                .arrays
                .iter()
                .map(|a| a.get_array_memory_size())
                .sum::<usize>()
    }
}

/// One value per pick: (source array, row) from `sources`, or null for `None`.
fn gather(
    data_type: &DataType,
    sources: &[ArrayRef],
    picks: impl Iterator<Item = Option<(usize, usize)>>,
) -> Result<ArrayRef> {
    let nulls = new_null_array(data_type, 1);
    let null = (sources.len(), 0);
    let indices: Vec<(usize, usize)> = picks.map(|p| p.unwrap_or(null)).collect();
    let arrays: Vec<&dyn Array> = sources
        .iter()
        .map(|a| a.as_ref())
        .chain([nulls.as_ref()])
        .collect();
    Ok(arrow_select::interleave::interleave(&arrays, &indices)?)
}

/// The accumulator of an aggregate without GROUP BY.
#[derive(Debug)]
struct RowAnyValue {
    value: ScalarValue,
}

impl Accumulator for RowAnyValue {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let a = &values[0];
        if self.value.is_null()
            && let Some(row) = (0..a.len()).find(|&i| a.is_valid(i))
        {
            self.value = ScalarValue::try_from_array(a, row)?;
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.value.clone())
    }

    fn size(&self) -> usize {
        size_of::<Self>() + self.value.size() - size_of::<ScalarValue>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.value.clone()])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::UInt32Type;
    use arrow_array::{ListArray, RecordBatch, UInt32Array};
    use arrow_schema::Schema;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// (group, value, list) rows: groups whose first rows are null, one group all null.
    fn table() -> RecordBatch {
        let (mut g, mut v, mut l) = (Vec::new(), Vec::new(), Vec::new());
        for row in 0..2_000u32 {
            let group = row % 301;
            g.push(group);
            let null = group == 7 || (row < 900 && group % 3 == 0);
            v.push((!null).then_some(row));
            l.push((!null).then(|| vec![Some(row), Some(group)]));
        }
        let list = ListArray::from_iter_primitive::<UInt32Type, _, _>(l);
        let schema = Schema::new(vec![
            Field::new("g", DataType::UInt32, false),
            Field::new("v", DataType::UInt32, true),
            Field::new("l", list.data_type().clone(), true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(UInt32Array::from(g)),
                Arc::new(UInt32Array::from(v)),
                Arc::new(list),
            ],
        )
        .unwrap()
    }

    async fn rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches).unwrap();
        text.to_string().lines().map(str::to_string).collect()
    }

    /// `table()` as `t`, in `parts` equal partitions, read in small batches (a group's value
    /// may come from any of many batches) by as many target partitions.
    fn context(parts: usize) -> SessionContext {
        let config = SessionConfig::new()
            .with_batch_size(97)
            .with_target_partitions(parts);
        let ctx = SessionContext::new_with_config(config);
        let t = table();
        let n = t.num_rows() / parts;
        let parts = (0..parts).map(|i| vec![t.slice(i * n, n)]).collect();
        let mem = MemTable::try_new(t.schema(), parts).unwrap();
        ctx.register_table("t", Arc::new(mem)).unwrap();
        ctx
    }

    #[tokio::test]
    async fn equals_datafusions_any_value_grouped_and_overall() {
        // One partition: "first in input order" is then deterministic for both.
        let ctx = context(1);
        let queries = [
            "SELECT g, any_value(v) AS v, any_value(l) AS l FROM t GROUP BY g ORDER BY g",
            "SELECT any_value(v) AS v, any_value(l) AS l FROM t",
            "SELECT g, any_value(v) FILTER (WHERE v % 2 = 1) AS v FROM t GROUP BY g ORDER BY g",
        ];
        let mut theirs = Vec::new();
        for q in queries {
            theirs.push(rows(&ctx, q).await);
        }
        ctx.register_udaf(any_value_udaf());
        for (q, theirs) in queries.iter().zip(theirs) {
            let ours = rows(&ctx, q).await;
            assert!(ours.len() > 4, "{q}");
            assert_eq!(ours, theirs, "{q}");
        }
    }

    /// Several partitions: partial aggregates merged (the state path). Each group's value is
    /// one of its own non-null values.
    #[tokio::test]
    async fn merged_partial_results_keep_a_value_of_the_group() {
        let ctx = context(4);
        ctx.register_udaf(any_value_udaf());
        let check = "SELECT count(*) AS groups, \
              count(*) FILTER (WHERE v % 301 <> g OR l[2] <> g OR (v IS NULL) <> (g = 7)) AS wrong \
            FROM (SELECT g, any_value(v) AS v, any_value(l) AS l FROM t GROUP BY g)";
        let out = rows(&ctx, check).await;
        assert_eq!(out[3], "| 301    | 0     |", "{out:?}");
    }

    #[test]
    fn emitting_the_first_groups_keeps_the_rest() {
        let mut acc = GroupsAnyValue {
            data_type: DataType::UInt32,
            arrays: Vec::new(),
            chosen: Vec::new(),
        };
        let a: ArrayRef = Arc::new(UInt32Array::from(vec![None, Some(1), Some(2), Some(3)]));
        acc.update_batch(&[a], &[0, 1, 0, 2], None, 4).unwrap();
        let first = acc.evaluate(EmitTo::First(2)).unwrap();
        assert_eq!(first.as_ref(), &UInt32Array::from(vec![Some(2), Some(1)]));
        let rest = acc.evaluate(EmitTo::All).unwrap();
        assert_eq!(rest.as_ref(), &UInt32Array::from(vec![Some(3), None]));
        assert!(acc.arrays.is_empty());
    }
}
