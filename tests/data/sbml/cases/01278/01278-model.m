(*

category:        Test
synopsis:        Use of the 'rem' MathML in an assignment rule.
componentTags:   AssignmentRule, CSymbolTime, Parameter
testTags:        InitialValueReassigned, L3v2MathML, NonConstantParameter
testType:        TimeCourse
levels:          3.2
generatedBy:     Numeric
packagesPresent: 

In this model, the 'rem' MathML symbol is used in an assignment rule.

The model contains:
* 1 parameter (p1)

There is one rule:

[{width:30em,margin: 1em auto}|  *Type*  |  *Variable*  |  *Formula*  |
| Assignment | p1 | $rem(time, 2)$ |]

The initial conditions are as follows:

[{width:35em,margin: 1em auto}|       | *Value* | *Constant* |
| Initial value of parameter p1 | $rem(time, 2)$ | variable |]

*)
