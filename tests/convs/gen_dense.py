# gen_dense.py OUTDIR - Gemm and MatMul models with constant weights (the packed-panel path of
# passes/ops/matmul.c, which the ONNX test data does not reach), with a numpy reference.
import sys
import onnx, numpy as np, os
from onnx import helper, TensorProto, numpy_helper
os.chdir(sys.argv[1])
rng=np.random.default_rng(1)
for tb in (0,1):
  for M,K,N,alpha,beta,cshape in ((5,64,256,0.5,2.0,(256,)),(1,100,384,1.0,1.0,(1,384)),(3,16,512,1.0,0.0,None)):
    name=f"g_tb{tb}_{M}_{K}_{N}"
    os.makedirs(name+'/test_data_set_0',exist_ok=True)
    B=rng.standard_normal((K,N)).astype(np.float32)
    inits=[numpy_helper.from_array(B.T.copy() if tb else B,'B')]
    ins=['a','B']
    C=None
    if cshape:
        C=rng.standard_normal(cshape).astype(np.float32); inits.append(numpy_helper.from_array(C,'C')); ins.append('C')
    node=helper.make_node('Gemm',ins,['y'],alpha=alpha,beta=beta,transB=tb)
    g=helper.make_graph([node],'g',[helper.make_tensor_value_info('a',TensorProto.FLOAT,[M,K])],[helper.make_tensor_value_info('y',TensorProto.FLOAT,[M,N])],inits)
    m=helper.make_model(g,opset_imports=[helper.make_opsetid('',13)]); m.ir_version=8
    onnx.save(m,name+'/model.onnx')
    A=rng.standard_normal((M,K)).astype(np.float32)
    Y=alpha*(A.astype(np.float64)@B)+(beta*C if C is not None else 0)
    open(name+'/test_data_set_0/input_0.pb','wb').write(numpy_helper.from_array(A,'a').SerializeToString())
    open(name+'/test_data_set_0/output_0.pb','wb').write(numpy_helper.from_array(Y.astype(np.float32),'y').SerializeToString())

rng=np.random.default_rng(2)
# (7,40) x 24: 7 rows by 3 vectors of 8 lanes (AVX2), which the register tile cost model
# (passes/sched_tile.c) runs as 7 rows by 1 vector. (1,13,512) x 1152: 2.4 MB of weights, more
# than the L2, over few rows: the panels outermost (passes/schedule.c, panels_outer); (13,1100)
# x 320: the same with panels narrowed to fit the L2 (64 columns with AVX-512); their
# weights scaled by 1/sqrt(K) so that float32 sums stay within the tolerance.
for ash,N in (((2,3,64),256),((64,),256),((5,64),384),((1,1,7,32),512),((4,64),200),((7,40),24),((1,13,512),1152),((13,1100),320)):
    K=ash[-1]; name="m_"+"x".join(map(str,ash))+f"_{N}"
    os.makedirs(name+'/test_data_set_0',exist_ok=True)
    B=rng.standard_normal((K,N)).astype(np.float32)
    if K>64: B=(B/np.sqrt(K)).astype(np.float32)
    node=helper.make_node('MatMul',['a','B'],['y'])
    A=rng.standard_normal(ash).astype(np.float32)
    Y=(A.astype(np.float64)@B).astype(np.float32)
    g=helper.make_graph([node],'g',[helper.make_tensor_value_info('a',TensorProto.FLOAT,list(ash))],[helper.make_tensor_value_info('y',TensorProto.FLOAT,list(Y.shape))],[numpy_helper.from_array(B,'B')])
    m=helper.make_model(g,opset_imports=[helper.make_opsetid('',13)]); m.ir_version=8
    onnx.save(m,name+'/model.onnx')
    open(name+'/test_data_set_0/input_0.pb','wb').write(numpy_helper.from_array(A,'a').SerializeToString())
    open(name+'/test_data_set_0/output_0.pb','wb').write(numpy_helper.from_array(Y,'y').SerializeToString())

# Linear + GELU as torch exports it (MatMul, Add bias, Div by sqrt 2, Erf, Add 1, Mul, Mul 0.5)
# over channel-last maps with leading batch dims (ConvNeXt's and the transformers' MLPs): the
# blocked MatMul with the Erf chain fused as its epilogue. Weights scaled so that x / sqrt 2
# reaches every branch of erf (|.| < 1, 1..4, >= 4).
rng=np.random.default_rng(3)
import math
for ash,N in (((1,14,14,48),192),((1,7,7,96),40)):
    K=ash[-1]; name="mgelu_"+"x".join(map(str,ash))+f"_{N}"
    os.makedirs(name+'/test_data_set_0',exist_ok=True)
    B=(rng.standard_normal((K,N))*2/math.sqrt(K)).astype(np.float32)
    bias=rng.standard_normal(N).astype(np.float32)
    cs=[numpy_helper.from_array(np.array(v,np.float32),n) for n,v in (('s2',math.sqrt(2)),('one',1.0),('half',0.5))]
    nodes=[helper.make_node('MatMul',['a','B'],['mm']),helper.make_node('Add',['bias','mm'],['z']),
           helper.make_node('Div',['z','s2'],['d']),helper.make_node('Erf',['d'],['e']),
           helper.make_node('Add',['e','one'],['e1']),helper.make_node('Mul',['z','e1'],['p']),
           helper.make_node('Mul',['p','half'],['y'])]
    A=rng.standard_normal(ash).astype(np.float32)
    Z=A.astype(np.float64)@B+bias
    Y=(Z*(1+np.vectorize(math.erf)(Z/math.sqrt(2)))*0.5).astype(np.float32)
    assert np.abs(Z/math.sqrt(2)).max()>=4 and np.mean(np.abs(Z/math.sqrt(2))<1)>0.2
    g=helper.make_graph(nodes,'g',[helper.make_tensor_value_info('a',TensorProto.FLOAT,list(ash))],[helper.make_tensor_value_info('y',TensorProto.FLOAT,list(Y.shape))],[numpy_helper.from_array(B,'B'),numpy_helper.from_array(bias,'bias')]+cs)
    m=helper.make_model(g,opset_imports=[helper.make_opsetid('',13)]); m.ir_version=8
    onnx.save(m,name+'/model.onnx')
    open(name+'/test_data_set_0/input_0.pb','wb').write(numpy_helper.from_array(A,'a').SerializeToString())
    open(name+'/test_data_set_0/output_0.pb','wb').write(numpy_helper.from_array(Y,'y').SerializeToString())

# MatMuls whose B has more than 4096 rows (K): its panels (256 bytes a k) do not fit half the L2,
# so split_channels cuts K into chunks summed in order, the bias and a Relu after the last
# (passes/split_channels.c, chunk_k): [2, 7, 4608] x [4608, 96] in 3 chunks; and the pattern
# of a speech model's subsampling (a strided conv of 1 input channel to 256, its channels and
# frequencies flattened by Transpose + Reshape into a linear layer of K = 256 x 39 = 9984,
# 6 chunks); that conv's output is 2 MB from a 32 KB input, its rows outermost
# (passes/schedule.c, block_order_rows).
rng=np.random.default_rng(4)
def save_case(name,nodes,inits,A,Y):
    os.makedirs(name+'/test_data_set_0',exist_ok=True)
    g=helper.make_graph(nodes,'g',[helper.make_tensor_value_info('a',TensorProto.FLOAT,list(A.shape))],[helper.make_tensor_value_info('y',TensorProto.FLOAT,list(Y.shape))],inits)
    m=helper.make_model(g,opset_imports=[helper.make_opsetid('',13)]); m.ir_version=8
    onnx.save(m,name+'/model.onnx')
    open(name+'/test_data_set_0/input_0.pb','wb').write(numpy_helper.from_array(A,'a').SerializeToString())
    open(name+'/test_data_set_0/output_0.pb','wb').write(numpy_helper.from_array(Y.astype(np.float32),'y').SerializeToString())
K,N=4608,96
B=(rng.standard_normal((K,N))/np.sqrt(K)).astype(np.float32); bias=rng.standard_normal(N).astype(np.float32)
A=rng.standard_normal((2,7,K)).astype(np.float32)
save_case('m_ksplit_2x7x4608_96',[helper.make_node('MatMul',['a','B'],['mm']),helper.make_node('Add',['mm','bias'],['z']),helper.make_node('Relu',['z'],['y'])],
          [numpy_helper.from_array(B,'B'),numpy_helper.from_array(bias,'bias')],A,np.maximum(A.astype(np.float64)@B+bias,0))
C,T,F,N=256,100,80,128
W=(rng.standard_normal((C,1,3,3))/3).astype(np.float32); wb=rng.standard_normal(C).astype(np.float32)*0.1
A=rng.standard_normal((1,1,T,F)).astype(np.float32)
ot,of=(T-3)//2+1,(F-3)//2+1
X=np.zeros((C,ot,of))
for i in range(3):
    for j in range(3): X+=W[:,0,i,j][:,None,None]*A[0,0,i:i+2*ot:2,j:j+2*of:2].astype(np.float64)[None]
X=np.maximum(X+wb[:,None,None],0)
K=C*of
B=(rng.standard_normal((K,N))/np.sqrt(K)).astype(np.float32); bias=rng.standard_normal(N).astype(np.float32)
Y=X.transpose(1,0,2).reshape(1,ot,K)@B+bias
save_case('m_ksplit_subsample',[helper.make_node('Conv',['a','W','wb'],['c'],strides=[2,2]),helper.make_node('Relu',['c'],['r']),
          helper.make_node('Transpose',['r'],['t'],perm=[0,2,1,3]),helper.make_node('Reshape',['t','shp'],['f']),
          helper.make_node('MatMul',['f','B'],['mm']),helper.make_node('Add',['mm','bias'],['y'])],
          [numpy_helper.from_array(W,'W'),numpy_helper.from_array(wb,'wb'),numpy_helper.from_array(np.array([1,ot,K],np.int64),'shp'),
           numpy_helper.from_array(B,'B'),numpy_helper.from_array(bias,'bias')],A,Y)
# Gemms of K above 4096 (chunk_k): transB with alpha, beta and a bias C (which only the first
# chunk adds), and B [K, N] of K 5000 (5 chunks of 1000).
for M,K,N,tb,alpha,beta in ((13,4352,80,1,0.5,2.0),(20,5000,72,0,1.0,1.0)):
    B=(rng.standard_normal((K,N))/np.sqrt(K)).astype(np.float32); C=rng.standard_normal(N).astype(np.float32)
    A=rng.standard_normal((M,K)).astype(np.float32)
    save_case(f'g_ksplit_tb{tb}_{M}_{K}_{N}',[helper.make_node('Gemm',['a','B','C'],['y'],alpha=alpha,beta=beta,transB=tb)],
              [numpy_helper.from_array(B.T.copy() if tb else B,'B'),numpy_helper.from_array(C,'C')],A,alpha*(A.astype(np.float64)@B)+beta*C)
