//! Fields inside a table's columns, as DuckDB's nested ALTERs name them: a path of names from a
//! column down, a STRUCT's field by its name (case-insensitive, as DuckDB's), a LIST's element as
//! `element`, a MAP's key and value as `key` and `value` (DuckDB's names for them, and Iceberg's).
//! A changed field is put back by rebuilding the fields above it: Iceberg types are values.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{ListType, MapType, NestedField, NestedFieldRef, StructType, Type};

/// The fields directly inside `ty`: a STRUCT's fields, a LIST's element, a MAP's key and value;
/// none for a primitive type.
pub fn children(ty: &Type) -> Vec<NestedFieldRef> {
    match ty {
        Type::Struct(s) => s.fields().to_vec(),
        Type::List(l) => vec![l.element_field.clone()],
        Type::Map(m) => vec![m.key_field.clone(), m.value_field.clone()],
        Type::Primitive(_) => vec![],
    }
}

/// `ty` with `children` (as [`children`] lists them) in place of its own.
pub fn with_children(ty: &Type, mut children: Vec<NestedFieldRef>) -> Type {
    match ty {
        Type::Struct(_) => Type::Struct(StructType::new(children)),
        Type::List(_) if children.len() == 1 => Type::List(ListType::new(children.remove(0))),
        Type::Map(_) if children.len() == 2 => {
            let value = children.remove(1);
            Type::Map(MapType::new(children.remove(0), value))
        }
        other => other.clone(),
    }
}

/// `field` with another type (its id, name, nullability and doc kept).
pub fn with_type(field: &NestedField, ty: Type) -> NestedFieldRef {
    Arc::new(NestedField { field_type: Box::new(ty), ..field.clone() })
}

/// The position among `fields` of the one named `name` (case-insensitive).
pub fn position(fields: &[NestedFieldRef], name: &str) -> Option<usize> {
    fields.iter().position(|f| f.name.eq_ignore_ascii_case(name))
}

/// Where a path leads among a table's columns.
#[derive(Debug, PartialEq, Eq)]
pub enum Walk {
    /// The position of each step among the fields above it (the first: among the columns).
    Found(Vec<usize>),
    /// The path's column does not exist.
    NoColumn,
    /// `path[depth]` is a primitive: nothing is inside it.
    NotNested { depth: usize },
    /// `path[depth]` is not inside the field before it.
    NoField { depth: usize },
}

/// Follows `path` from `columns` down.
pub fn walk(columns: &[NestedFieldRef], path: &[String]) -> Walk {
    let Some(first) = path.first().and_then(|name| position(columns, name)) else {
        return Walk::NoColumn;
    };
    let mut steps = vec![first];
    let mut field = columns[first].clone();
    for (depth, name) in path.iter().enumerate().skip(1) {
        if field.field_type.is_primitive() {
            return Walk::NotNested { depth: depth - 1 };
        }
        let inside = children(&field.field_type);
        let Some(i) = position(&inside, name) else {
            return Walk::NoField { depth };
        };
        steps.push(i);
        field = inside[i].clone();
    }
    Walk::Found(steps)
}

/// The field `steps` (as [`walk`] found them) lead to.
pub fn field_at(columns: &[NestedFieldRef], steps: &[usize]) -> NestedFieldRef {
    let mut field = columns[steps[0]].clone();
    for &i in &steps[1..] {
        field = children(&field.field_type)[i].clone();
    }
    field
}

/// `columns` with the fields inside the field `steps` lead to (all of them when `steps` is
/// empty: the columns themselves) replaced by `edit`'s answer, the fields above rebuilt.
pub fn edit_inside<E>(
    columns: &[NestedFieldRef],
    steps: &[usize],
    edit: impl FnOnce(Vec<NestedFieldRef>) -> Result<Vec<NestedFieldRef>, E>,
) -> Result<Vec<NestedFieldRef>, E> {
    let Some((&first, below)) = steps.split_first() else {
        return edit(columns.to_vec());
    };
    let mut out = columns.to_vec();
    let field = &columns[first];
    let inside = edit_inside(&children(&field.field_type), below, edit)?;
    out[first] = with_type(field, with_children(&field.field_type, inside));
    Ok(out)
}

/// The ids of `field` and of every field inside it.
pub fn ids(field: &NestedField) -> Vec<i32> {
    let mut out = vec![field.id];
    for child in children(&field.field_type) {
        out.extend(ids(&child));
    }
    out
}

/// The ids of `to`'s fields by those of `from`'s, for two lists of the same fields numbered
/// differently (a new table's schema, whose ids the metadata builder assigns afresh).
pub fn id_map(from: &[NestedFieldRef], to: &[NestedFieldRef], out: &mut HashMap<i32, i32>) {
    for (a, b) in from.iter().zip(to) {
        out.insert(a.id, b.id);
        id_map(&children(&a.field_type), &children(&b.field_type), out);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use iceberg::spec::PrimitiveType;

    use super::*;

    /// id: 1, s: 2 {a: 3, n: 4 {x: 5}}, l: 6 [7 {y: 8}], m: 9 <10, 11>
    pub(crate) fn columns() -> Vec<NestedFieldRef> {
        let int = || Type::Primitive(PrimitiveType::Int);
        let n = Type::Struct(StructType::new(vec![Arc::new(NestedField::optional(5, "x", int()))]));
        let s = Type::Struct(StructType::new(vec![
            Arc::new(NestedField::optional(3, "a", int())),
            Arc::new(NestedField::optional(4, "n", n)),
        ]));
        let element = Type::Struct(StructType::new(vec![Arc::new(NestedField::optional(8, "y", int()))]));
        let l = Type::List(ListType::new(Arc::new(NestedField::list_element(7, element, false))));
        let m = Type::Map(MapType::optional(10, Type::Primitive(PrimitiveType::String), 11, int()));
        vec![
            Arc::new(NestedField::required(1, "id", int())),
            Arc::new(NestedField::optional(2, "s", s)),
            Arc::new(NestedField::optional(6, "l", l)),
            Arc::new(NestedField::optional(9, "m", m)),
        ]
    }

    fn path(p: &str) -> Vec<String> {
        p.split('.').map(str::to_string).collect()
    }

    #[test]
    fn paths_go_through_structs_lists_and_maps() {
        let cols = columns();
        let id_of = |p: &str| match walk(&cols, &path(p)) {
            Walk::Found(steps) => field_at(&cols, &steps).id,
            other => panic!("{p}: {other:?}"),
        };
        assert_eq!(id_of("S.N.X"), 5);
        assert_eq!(id_of("l.element.y"), 8);
        assert_eq!(id_of("m.value"), 11);
        assert_eq!(walk(&cols, &path("nope.a")), Walk::NoColumn);
        assert_eq!(walk(&cols, &path("id.a")), Walk::NotNested { depth: 0 });
        assert_eq!(walk(&cols, &path("s.a.b")), Walk::NotNested { depth: 1 });
        assert_eq!(walk(&cols, &path("s.zz.q")), Walk::NoField { depth: 1 });
    }

    #[test]
    fn an_edit_rebuilds_the_fields_above() {
        let cols = columns();
        let Walk::Found(steps) = walk(&cols, &path("s.n")) else { panic!() };
        let edited = edit_inside::<()>(&cols, &steps, |mut inside| {
            inside.push(Arc::new(NestedField::optional(12, "z", Type::Primitive(PrimitiveType::Long))));
            Ok(inside)
        })
        .unwrap();
        let Walk::Found(steps) = walk(&edited, &path("s.n.z")) else { panic!() };
        assert_eq!(field_at(&edited, &steps).id, 12);
        assert_eq!(ids(&edited[1]), vec![2, 3, 4, 5, 12]);
        assert_eq!(edited[2..], cols[2..]);
        let mut map = HashMap::new();
        id_map(&cols, &edited, &mut map);
        assert_eq!(map[&5], 5);
    }
}
