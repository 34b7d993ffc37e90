(*

category:        Test
synopsis:        A rate rule that uses avogadro.
componentTags:   CSymbolAvogadro, Parameter, RateRule
testTags:        NonConstantParameter
testType:        TimeCourse
levels:          3.1, 3.2
generatedBy:     Analytic
packagesPresent: 

In this model, the avogadro csymbol is used in a rate rule.

The model contains:
* 1 parameter (p1)

There is one rule:

[{width:30em,margin: 1em auto}|  *Type*  |  *Variable*  |  *Formula*  |
| Rate | p1 | $avogadro / 1e23$ |]

The initial conditions are as follows:

[{width:35em,margin: 1em auto}|       | *Value* | *Constant* |
| Initial value of parameter p1 | $1$ | variable |]

Note: The test data for this model was generated from an analytical
solution of the system of equations.

*)
