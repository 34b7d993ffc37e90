(*

category:        Test
synopsis:        A FunctionDefinition with no MathML.
componentTags:   FunctionDefinition, Parameter
testTags:        NoMathML
testType:        TimeCourse
levels:          3.2
generatedBy:     Numeric
packagesPresent: 

An unused FunctionDefinition with no MathML child is present in the model.

The model contains:
* 1 parameter (p1)
The model contains the following function definition:

[{width:30em,margin: 1em auto}|  *Id*  |  *Arguments*  |  *Formula*  |
 | foo |  | $$ |
]
The initial conditions are as follows:

[{width:35em,margin: 1em auto}|       | *Value* | *Constant* |
| Initial value of parameter p1 | $2$ | constant |]

*)
