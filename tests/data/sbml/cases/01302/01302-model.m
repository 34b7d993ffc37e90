(*

category:        Test
synopsis:        An empty reaction's identifier used in a rate rule.
componentTags:   Parameter, RateRule, Reaction
testTags:        NonConstantParameter
testType:        TimeCourse
levels:          3.2
generatedBy:     Analytic
packagesPresent: 

 A reaction with no products nor reactants, but which has a kinetic law, has its identifier used in a rate rule.

The model contains:
* 1 parameter (p1)

There is one reaction:

[{width:30em,margin: 1em auto}|  *Reaction*  |  *Rate*  |
| J0: -> | $3$ |]


There is one rule:

[{width:30em,margin: 1em auto}|  *Type*  |  *Variable*  |  *Formula*  |
| Rate | p1 | $J0$ |]

The initial conditions are as follows:

[{width:35em,margin: 1em auto}|       | *Value* | *Constant* |
| Initial value of parameter p1 | $0$ | variable |]

Note: The test data for this model was generated from an analytical
solution of the system of equations.

*)
