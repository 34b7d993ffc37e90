(*

category:        Test
synopsis:        Just a compartment and a species.
componentTags:   Compartment, Species
testTags:        Amount
testType:        TimeCourse
levels:          1.2, 2.1, 2.2, 2.3, 2.4, 2.5, 3.1, 3.2
generatedBy:     Analytic
packagesPresent: 

 This model test the simple existence of a species and a compartment.

The model contains:
* 1 species (S1)
* 1 compartment (C)
The initial conditions are as follows:

[{width:35em,margin: 1em auto}|       | *Value* | *Constant* |
| Initial concentration of species S1 | $2$ | variable |
| Initial volume of compartment 'C' | $1$ | constant |]

Note: The test data for this model was generated from an analytical
solution of the system of equations.

*)
