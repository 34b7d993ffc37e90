(*

category:        Test
synopsis:        Compartment with spatial dimensions of 7.
componentTags:   Compartment
testTags:        NonUnityCompartment
testType:        TimeCourse
levels:          3.1, 3.2
generatedBy:     Analytic
packagesPresent: 

This model contains only a compartment, but it has a spatial dimension of 7.  The numerics are not affected at all; this simply tests that the existence of this dimensionality doesn't affect the simulation.

The model contains:
* 1 compartment (c)
The initial conditions are as follows:

[{width:35em,margin: 1em auto}|       | *Value* | *Constant* |
| Initial volume of compartment 'c' | $4$ | constant |]

Note: The test data for this model was generated from an analytical
solution of the system of equations.

*)

