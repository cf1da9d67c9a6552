#[test]
fn triangle_of_large_input_does_not_overflow() {
    assert_eq!(rule_example::triangle(u32::MAX), 9_223_372_034_707_292_160);
}
