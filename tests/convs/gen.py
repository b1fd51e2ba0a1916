# gen.py OUTDIR - convolution models with constant weights (the paths of passes/ops/conv.c that the
# ONNX test data does not reach: its conv weights are graph inputs), with a numpy reference.
# Strided, dilated, asymmetric pads, 1-D/2-D/3-D, batch 2, 8..32 channels, depthwise, with and
# without Relu.
import onnx, numpy as np, os, sys
from onnx import helper as h, TensorProto as T, numpy_helper as nh
rng=np.random.default_rng(0)
def save(name,nodes,xs,x,outs,init,opset):
    """NAME/model.onnx (graph input x of shape xs, outputs outs: [(name, reference)]) and its test set"""
    g=h.make_graph(nodes,'g',[h.make_tensor_value_info('x',T.FLOAT,xs)],[h.make_tensor_value_info(n,T.FLOAT,list(v.shape)) for n,v in outs],init)
    m=h.make_model(g,opset_imports=[h.make_opsetid('',opset)]); m.ir_version=8
    os.makedirs(name+'/test_data_set_0',exist_ok=True)
    onnx.save(m,name+'/model.onnx')
    open(name+'/test_data_set_0/input_0.pb','wb').write(nh.from_array(x,'x').SerializeToString())
    for i,(n,v) in enumerate(outs):
        open(name+'/test_data_set_0/output_%d.pb'%i,'wb').write(nh.from_array(v,n).SerializeToString())

def ref(x,w,b,s,d,pb,pe):
    nsp=x.ndim-2
    xp=np.pad(x,[(0,0),(0,0)]+[(pb[i],pe[i]) for i in range(nsp)])
    M=w.shape[0]; ks=w.shape[2:]
    out=[(xp.shape[2+i]-((ks[i]-1)*d[i]+1))//s[i]+1 for i in range(nsp)]
    y=np.zeros((x.shape[0],M)+tuple(out),np.float64)
    for t in np.ndindex(*ks):
        sl=tuple(slice(t[i]*d[i], t[i]*d[i]+(out[i]-1)*s[i]+1, s[i]) for i in range(nsp))
        patch=xp[(slice(None),slice(None))+sl]
        y+=np.einsum('nc...,mc->nm...',patch,w[(slice(None),slice(None))+t])
    return y+b.reshape((1,M)+(1,)*nsp)
cases=[('s2_2d',[1,3,17,20],[16,3,3,3],[2,2],[1,1],[1,1,1,1],1),
       ('s2_2d_relu_asym',[2,5,9,11],[12,5,3,2],[2,3],[1,2],[0,1,2,1],1),
       ('s3_1d',[1,4,30],[8,4,5],[3],[1],[2,1],0),
       ('s2_3d',[1,2,6,7,9],[9,2,2,3,3],[1,2,2],[1,1,1],[1,0,1,0,1,1],1),
       ('s1_hyb',[1,16,12,40],[16,16,3,3],[1,1],[1,1],[1,1,1,1],1),
       ('s1_hyb_dil',[1,5,10,30],[8,5,3,3],[1,1],[2,2],[2,1,0,3],1),
       ('s1_hyb_1d',[2,3,25],[12,3,4],[1],[1],[2,2],0),
       ('s1_hyb_3d',[1,2,5,6,21],[8,2,2,3,3],[1,1,1],[1,1,1],[1,1,1,0,1,1],1),
       ('s1_cm32',[1,16,9,33],[32,16,3,3],[1,1],[1,1],[1,1,1,1],1),
       ('s2_wide',[1,16,20,70],[32,16,3,3],[2,2],[1,1],[1,1,1,1],1),
       # weights of at least 64 KiB: rows peeled too (passes/schedule.c peel_rows); 192
       # channels: weights regrouped per 64-channel tile (conv_tiles)
       ('s1_cm_rows',[1,32,7,9],[192,32,3,3],[1,1],[1,1],[1,1,1,1],1),
       ('s2_cm_rows_asym',[1,16,13,11],[128,16,5,5],[2,2],[1,1],[2,1,1,2],1),
       ('s1_cm_rows_96',[2,32,14,14],[96,32,3,3],[1,1],[1,1],[1,1,1,1],0),
       # at least 16 input channels on AVX-512: a zero-padded copy of the input (loop_pad) and
       # blocks of 32 output channels by a row of pixels (a row of 31: 11 + 11 + 9), also 1-D
       # dilated, 3-D, and padded only after
       ('pad_7x7',[1,64,7,7],[64,64,3,3],[1,1],[1,1],[1,1,1,1],1),
       ('pad_row31',[1,16,5,31],[64,16,3,3],[1,1],[1,1],[1,1,1,1],0),
       ('pad_1d_dil',[2,16,20],[32,16,3],[1],[2],[2,2],1),
       ('pad_3d',[1,16,4,5,6],[32,16,3,3,3],[1,1,1],[1,1,1],[1,1,1,1,1,1],0),
       ('pad_after_s2',[1,24,9,10],[64,24,3,3],[2,2],[1,1],[0,0,1,2],1),
       # padded, and few taps per output on rows of two vectors or more: vectors along the
       # width everywhere, no border columns left for the channel-innermost form (a vocoder's
       # dilated Conv1d, a decoder's 16 -> 32 3x3 conv; passes/schedule.c conv_layout)
       ('pad_wide_1d_dil5',[1,32,256],[32,32,3],[1],[5],[5,5],1),
       ('pad_wide_2d',[1,16,6,64],[32,16,3,3],[1,1],[1,1],[1,1,1,1],0),
       # more taps, but channel planes a multiple of 4 KiB apart: along the width too
       ('pad_wide_4k_plane',[1,32,8,128],[32,32,3,3],[1,1],[1,1],[1,1,1,1],1),
       # an input beyond half the L2 (655 KB): the channel tiles inside the rows
       # (passes/schedule.c, rows_outside_tiles), 40 channels as tiles and a rest
       ('wide_rows_outer',[1,16,64,160],[40,16,3,3],[1,1],[1,1],[1,1,1,1],1),
       # the same with AVX2's 8 lanes (the default CPU): tiles of at most 5 pixels by blocks
       # of 16 channels, a row of 26 as 5 x 5 and 1; a row of 11 as 4 + 4 + 3 by 3 blocks;
       # 24 channels, not a whole block: padded, the pixels blocked by block_list
       ('pad_row26',[1,32,3,26],[32,32,3,3],[1,1],[1,1],[1,1,1,1],1),
       ('pad_row11_m48',[1,32,4,11],[48,32,3,3],[1,1],[1,1],[1,1,1,1],0),
       ('pad_m24',[1,16,6,13],[24,16,3,3],[1,1],[1,1],[1,1,1,1],1),
       # an input beyond the L2 next to a block's weights (1 MB of padded input, 2 blocks of 32
       # channels on AVX-512): the rows outermost, the blocks inside each row (passes/schedule.c
       # block_order_rows), dilated
       ('rows_outer_dil2',[1,128,40,44],[64,128,3,3],[1,1],[2,2],[2,2,2,2],1),
       # few taps per output (3 x 7x7, a network's stem) on wide maps: vectors along the
       # width, stride-2 loads, the columns left over as a whole vector redone back
       # (passes/schedule.c conv_layout, vector_tile); 20 channels: blocks of 6 and a rest
       ('s2_stem',[2,3,9,225],[20,3,7,7],[2,2],[1,1],[3,3,3,3],1),
       ('s2_stem_narrow',[1,3,12,81],[16,3,7,7],[2,2],[1,1],[3,2,3,3],0),
       ('s1_few_taps',[1,1,12,50],[8,1,5,5],[1,1],[1,1],[2,2,2,2],1),
       # depthwise (group = C = M, weights [M,1,kh,kw]) on maps narrower than a vector, as a
       # keyword-spotting DS-CNN's 25x5 ones; and one strided with an odd channel count
       ('dw_narrow',[1,64,25,5],[64,1,3,3],[1,1],[1,1],[1,1,1,1],1,64),
       ('dw_narrow_s2',[2,24,9,6],[24,1,3,3],[2,2],[1,1],[1,0,1,1],0,24),
       # grouped (more than one group, fewer than all channels): the output channel loop
       # split by the channels of a group, the input read at the group alone, the channels of
       # a group blocked around the vectors (passes/schedule.c group_split); 4 and 16 output
       # channels a group, Cg != Mg, strided, and a group of 64 channels on a 14-wide map
       ('grp8_c4',[1,32,9,19],[32,4,3,3],[1,1],[1,1],[1,1,1,1],1,8),
       ('grp4_m16_c8',[2,32,7,11],[64,8,3,3],[2,2],[1,1],[1,1,1,1],0,4),
       ('grp2_c64',[1,128,6,14],[128,64,3,3],[1,1],[1,1],[1,1,1,1],1,2),
       # groups of whole vectors of output channels (32 and 16 with AVX-512, 8 with AVX2): the
       # groups split off first, each laid out and blocked as a dense conv inside them
       # (passes/schedule.c conv_nest): padded (ResNeXt's layer4 on a 7x7 map), strided, too
       # few input channels a group to pad (border pieces), and the weights' group tiles
       ('grp8_m32_7x7',[1,256,7,7],[256,32,3,3],[1,1],[1,1],[1,1,1,1],1,8),
       ('grp4_m16_s2',[1,64,11,13],[64,16,3,3],[2,2],[1,1],[1,1,1,1],0,4),
       ('grp6_m16_c8',[1,48,6,9],[96,8,3,3],[1,1],[1,1],[1,0,1,2],1,6),
       ('grp8_m8_c8',[1,64,9,10],[64,8,3,3],[1,1],[1,1],[1,1,1,1],1,8),
       # a group of one vector of output channels (16 with AVX-512) and at least 16 input
       # channels a group (ResNeXt-50's layer3): padded, weights cm, one vector by a row of
       # pixels (passes/schedule.c pad_candidate, conv_channel_block with `group`); the same
       # with Cg != Mg, strided on an odd map, and dilated
       ('grp4_m16_c16',[1,64,14,14],[64,16,3,3],[1,1],[1,1],[1,1,1,1],1,4),
       ('grp2_m16_c32',[1,64,9,11],[32,32,3,3],[1,1],[1,1],[1,1,1,1],0,2),
       ('grp3_m16_s2',[1,48,13,11],[48,16,3,3],[2,2],[1,1],[1,1,1,1],1,3),
       ('grp4_m16_d2',[1,64,10,10],[64,16,3,3],[1,1],[2,2],[2,2,2,2],1,4),
       # narrow groups and odd channel counts: 8 (ResNeXt's layer2) and 4 channels a group
       ('grp5_m8_c8',[1,40,7,9],[40,8,3,3],[1,1],[1,1],[1,1,1,1],1,5),
       ('grp3_m4_c4',[1,12,5,7],[12,4,3,3],[1,1],[1,1],[1,1,1,1],0,3),
       # more than a vector a group in whole half vectors (AVX-512: 24 and 40 channels, a
       # vector and a half-vector rest; RegNetX-1.6GF's 24): padded on a 14x14 map, strided on
       # an odd one, and Cg != Mg
       ('grp4_m24_c24',[1,96,14,14],[96,24,3,3],[1,1],[1,1],[1,1,1,1],1,4),
       ('grp3_m24_s2',[1,72,15,13],[72,24,3,3],[2,2],[1,1],[1,1,1,1],1,3),
       ('grp2_m40_c16',[1,32,9,11],[80,16,3,3],[1,1],[1,1],[1,1,1,1],0,2)]
def gref(x,w,b,s,d,pb,pe,g):
    cg,mg=x.shape[1]//g,w.shape[0]//g
    return np.concatenate([ref(x[:,i*cg:(i+1)*cg],w[i*mg:(i+1)*mg],b[i*mg:(i+1)*mg],s,d,pb,pe) for i in range(g)],axis=1)
os.chdir(sys.argv[1])
for name,xs,ws,s,d,pads,relu,*grp in cases:
    g=grp[0] if grp else 1
    os.makedirs(name+'/test_data_set_0',exist_ok=True)
    x=rng.standard_normal(xs).astype(np.float32); w=rng.standard_normal(ws).astype(np.float32); b=rng.standard_normal(ws[0]).astype(np.float32)
    nsp=len(xs)-2
    y=gref(x.astype(np.float64),w.astype(np.float64),b,s,d,pads[:nsp],pads[nsp:],g)
    if relu: y=np.maximum(y,0)
    y=y.astype(np.float32)
    nodes=[h.make_node('Conv',['x','W','B'],['c' if relu else 'y'],pads=pads,strides=s,dilations=d,group=g)]
    if relu: nodes.append(h.make_node('Relu',['c'],['y']))
    save(name,nodes,xs,x,[('y',y)],[nh.from_array(w,'W'),nh.from_array(b,'B')],13)
# Depthwise-separable blocks (1x1 expansion + Relu, 3x3 depthwise + Relu, 1x1 projection, at
# stride 1 with a residual Add and a GlobalAveragePool): the temporaries around the depthwise
# conv are stored NHWC at -O2 (passes/schedule.c, channel_last_layouts), which single convs on
# graph inputs never reach.
def block(name,xs,e,s,res):
    C=xs[1]; M=C*e
    we=rng.standard_normal([M,C,1,1]).astype(np.float32); be=rng.standard_normal(M).astype(np.float32)
    wd=rng.standard_normal([M,1,3,3]).astype(np.float32); bd=rng.standard_normal(M).astype(np.float32)
    wp=rng.standard_normal([C,M,1,1]).astype(np.float32); bp=rng.standard_normal(C).astype(np.float32)
    x=rng.standard_normal(xs).astype(np.float32)
    x64=x.astype(np.float64)
    t=np.maximum(gref(x64,we.astype(np.float64),be,[1,1],[1,1],[0,0],[0,0],1),0)
    u=np.maximum(gref(t,wd.astype(np.float64),bd,[s,s],[1,1],[1,1],[1,1],M),0)
    v=gref(u,wp.astype(np.float64),bp,[1,1],[1,1],[0,0],[0,0],1)
    nodes=[h.make_node('Conv',['x','We','Be'],['t0']),h.make_node('Relu',['t0'],['t']),
           h.make_node('Conv',['t','Wd','Bd'],['u0'],pads=[1,1,1,1],strides=[s,s],group=M),
           h.make_node('Relu',['u0'],['u']),h.make_node('Conv',['u','Wp','Bp'],['v'])]
    if res:
        v=v+x64
        nodes+=[h.make_node('Add',['v','x'],['r']),h.make_node('GlobalAveragePool',['r'],['y'])]
        y=v.mean(axis=(2,3),keepdims=True)
    else:
        nodes[-1].output[0]='y'
        y=v
    y=y.astype(np.float32)
    init=[nh.from_array(a,n) for a,n in [(we,'We'),(be,'Be'),(wd,'Wd'),(bd,'Bd'),(wp,'Wp'),(bp,'Bp')]]
    save(name,nodes,xs,x,[('y',y)],init,13)
block('dw_block_res_gap',[1,8,10,7],4,1,True)
block('dw_block_s2',[2,12,9,11],3,2,False)
# 16 -> 64 -> 16 channels: the 1x1 convs on 13-wide rows run MR pixels by U vectors, on 7-wide
# rows in blocks of 32 channels by a row (conv_channel_block)
block('dw_block_wide',[1,16,6,13],4,1,True)
block('dw_block_row7',[1,16,5,7],4,1,False)
# ConvNeXt-like blocks: a 7x7 depthwise conv, Transpose to channels-last, LayerNormalization
# over the channels, two MatMuls, Transpose back fused with the layer-scale Mul and the
# residual Add, twice. The depthwise convs' temporaries go NHWC with the Transposes' NCHW
# sides (passes/schedule.c permuting_accesses), so the Transposes become copies in order.
def convnext(name,xs,blocks):
    N,C,H,W=xs
    x=rng.standard_normal(xs).astype(np.float32)
    w0=rng.standard_normal([C,C,1,1]).astype(np.float32)/np.sqrt(C); b0=rng.standard_normal(C).astype(np.float32)
    init=[nh.from_array(w0,'W0'),nh.from_array(b0,'B0')]
    nodes=[h.make_node('Conv',['x','W0','B0'],['r0'])]
    r=gref(x.astype(np.float64),w0.astype(np.float64),b0,[1,1],[1,1],[0,0],[0,0],1)
    for i in range(blocks):
        wd=rng.standard_normal([C,1,7,7]).astype(np.float32)/7; bd=rng.standard_normal(C).astype(np.float32)
        g=rng.uniform(0.5,1.5,C).astype(np.float32); be=rng.standard_normal(C).astype(np.float32)
        m1=rng.standard_normal([C,2*C]).astype(np.float32)/np.sqrt(C); m2=rng.standard_normal([2*C,C]).astype(np.float32)/np.sqrt(2*C)
        sc=rng.uniform(0.5,1.5,[C,1,1]).astype(np.float32)
        init+=[nh.from_array(a,'%s%d'%(n,i)) for a,n in [(wd,'Wd'),(bd,'Bd'),(g,'G'),(be,'Be'),(m1,'M1'),(m2,'M2'),(sc,'S')]]
        p='%d'%i
        nodes+=[h.make_node('Conv',['r'+p,'Wd'+p,'Bd'+p],['d'+p],pads=[3,3,3,3],group=C),
                h.make_node('Transpose',['d'+p],['t'+p],perm=[0,2,3,1]),
                h.make_node('LayerNormalization',['t'+p,'G'+p,'Be'+p],['l'+p],axis=-1,epsilon=1e-6),
                h.make_node('MatMul',['l'+p,'M1'+p],['a'+p]),h.make_node('Relu',['a'+p],['b'+p]),
                h.make_node('MatMul',['b'+p,'M2'+p],['c'+p]),
                h.make_node('Transpose',['c'+p],['u'+p],perm=[0,3,1,2]),
                h.make_node('Mul',['u'+p,'S'+p],['v'+p]),
                h.make_node('Add',['v'+p,'r'+p],['r%d'%(i+1)])]
        d=gref(r,wd.astype(np.float64),bd,[1,1],[1,1],[3,3],[3,3],C)
        t=d.transpose(0,2,3,1)
        mu=t.mean(-1,keepdims=True); var=((t-mu)**2).mean(-1,keepdims=True)
        l=(t-mu)/np.sqrt(var+1e-6)*g+be
        c=np.maximum(l@m1,0)@m2
        r=c.transpose(0,3,1,2)*sc+r
    nodes[-1].output[0]='y'
    y=r.astype(np.float32)
    save(name,nodes,xs,x,[('y',y)],init,17)
convnext('convnext_blocks',[2,24,9,11],2)
convnext('convnext_wide',[1,48,14,14],2)
# ResNet-like chains (a stem conv + Relu, a 3x3 max pool, a basic block with its residual, a
# stride-2 block with a 1x1 stride-2 downsample, a global pool): convs of at least two vectors
# of output channels keep their temporaries NHWC at -O2 (channel_last_layouts, wide_conv),
# padded and with the channels innermost in the taps (sink_channels) on AVX-512. Channel
# counts that are not multiples of the 32-channel blocks, odd maps, batch 2. Two outputs: the
# last block's map and the pool.
def maxpool(x):
    n,c,hh,ww=x.shape; oh,ow=(hh+2-3)//2+1,(ww+2-3)//2+1
    xp=np.pad(x,[(0,0),(0,0),(1,1),(1,1)],constant_values=-np.inf)
    return np.max([xp[:,:,i:i+2*oh-1:2,j:j+2*ow-1:2] for i in range(3) for j in range(3)],axis=0)
def resnet(name,xs,c1,c2):
    ws={}
    def conv(inp,out,cin,cout,k,s,p,x):
        w=rng.standard_normal([cout,cin,k,k]).astype(np.float32)/np.sqrt(cin*k*k); b=rng.standard_normal(cout).astype(np.float32)
        ws['W'+out],ws['B'+out]=w,b
        nodes.append(h.make_node('Conv',[inp,'W'+out,'B'+out],[out],pads=[p]*4,strides=[s,s]))
        return gref(x,w.astype(np.float64),b,[s,s],[1,1],[p,p],[p,p],1)
    def relu(inp,out,x):
        nodes.append(h.make_node('Relu',[inp],[out])); return np.maximum(x,0)
    def add(a,b,out,xa,xb):
        nodes.append(h.make_node('Add',[a,b],[out])); return xa+xb
    nodes=[]
    x=rng.standard_normal(xs).astype(np.float32)
    t=relu('s','sr',conv('x','s',xs[1],c1,5,2,2,x.astype(np.float64)))
    nodes.append(h.make_node('MaxPool',['sr'],['m'],kernel_shape=[3,3],strides=[2,2],pads=[1,1,1,1])); m=maxpool(t)
    a=relu('a','ar',conv('m','a',c1,c1,3,1,1,m))
    r1=relu('r1a','r1',add('b','m','r1a',conv('ar','b',c1,c1,3,1,1,a),m))
    c=relu('c','cr',conv('r1','c',c1,c2,3,2,1,r1))
    d=conv('cr','d',c2,c2,3,1,1,c)
    e=conv('r1','e',c1,c2,1,2,0,r1)
    r2=relu('r2a','r2',add('d','e','r2a',d,e))
    nodes.append(h.make_node('GlobalAveragePool',['r2'],['y'])); y=r2.mean(axis=(2,3),keepdims=True)
    outs=[('r2',r2.astype(np.float32)),('y',y.astype(np.float32))]
    save(name,nodes,xs,x,outs,[nh.from_array(v,n) for n,v in ws.items()],13)
resnet('res_32_48',[1,3,27,23],32,48)
resnet('res_b2_16_40',[2,3,20,31],16,40)
resnet('res_64_96',[1,3,30,34],64,96)
# 256 channels (padded NHWC inputs of 1 KB per pixel, 32-channel blocks over 4x4 and 2x2 maps)
resnet('res_256',[1,3,14,14],256,256)
# A squeeze-excite block as EfficientNet's (stem conv + SiLU, 1x1 expansion + SiLU, 3x3
# depthwise + SiLU, squeeze-excite: global pool, 1x1 + SiLU, 1x1 + Sigmoid, Mul; 1x1
# projection, residual Add, HardSwish, global pool): the SE Mul and the HardSwish are
# elementwise kernels on 4-d temporaries, which go NHWC with their neighbours at -O2
# (channel_last_layouts, elementwise_user) and run their loops in the store's order
# (store_order). Odd maps and channel counts, batch 2.
def se_block(name,xs,c,e):
    ws={}; nodes=[]
    def conv(inp,out,cin,cout,k,s,g,x):
        w=rng.standard_normal([cout,cin//g,k,k]).astype(np.float32)/np.sqrt(cin//g*k*k); b=rng.standard_normal(cout).astype(np.float32)*0.1
        ws['W'+out],ws['B'+out]=w,b
        nodes.append(h.make_node('Conv',[inp,'W'+out,'B'+out],[out],pads=[k//2]*4,strides=[s,s],group=g))
        return gref(x,w.astype(np.float64),b,[s,s],[1,1],[k//2]*2,[k//2]*2,g)
    def sig(v): return 1/(1+np.exp(-v))
    def silu(inp,out,x):
        nodes.extend([h.make_node('Sigmoid',[inp],[out+'s']),h.make_node('Mul',[inp,out+'s'],[out])]); return x*sig(x)
    x=rng.standard_normal(xs).astype(np.float32)
    t=silu('s','sa',conv('x','s',xs[1],c,3,1,1,x.astype(np.float64)))
    u=silu('e','ea',conv('sa','e',c,c*e,1,1,1,t))
    v=silu('d','da',conv('ea','d',c*e,c*e,3,1,c*e,u))
    nodes.append(h.make_node('GlobalAveragePool',['da'],['q'])); q=v.mean(axis=(2,3),keepdims=True)
    q=silu('f1','f1a',conv('q','f1',c*e,c//2,1,1,1,q))
    q=sig(conv('f1a','f2',c//2,c*e,1,1,1,q)); nodes.append(h.make_node('Sigmoid',['f2'],['f2s']))
    nodes.append(h.make_node('Mul',['da','f2s'],['m'])); m=v*q
    p=conv('m','p',c*e,c,1,1,1,m)
    nodes.append(h.make_node('Add',['p','sa'],['r'])); r=p+t
    nodes.append(h.make_node('HardSwish',['r'],['hs'])); hs=r*np.clip(r/6+0.5,0,1)
    nodes.append(h.make_node('GlobalAveragePool',['hs'],['y'])); y=hs.mean(axis=(2,3),keepdims=True).astype(np.float32)
    save(name,nodes,xs,x,[('y',y)],[nh.from_array(v,n) for n,v in ws.items()],14)
se_block('se_block',[2,3,11,13],16,4)
se_block('se_block_24',[1,3,9,20],24,6)
# RegNetY-style blocks (1x1, a grouped 3x3, 1x1, residual) whose groups are whole half vectors
# but not whole vectors on AVX-512 (RegNetY-1.6GF's 24 channels a group, RegNetY-8GF's 56):
# their temporaries go NHWC there too (schedule.c's channel_last_user, as group_split takes
# such groups), the 56-channel one in the Winograd form (its transforms along the channels).
def regnet_block(name,xs,wd,gw):
    ws={}; nodes=[]
    def conv(inp,out,cin,cout,k,g,x):
        w=rng.standard_normal([cout,cin//g,k,k]).astype(np.float32)/np.sqrt(cin//g*k*k); b=rng.standard_normal(cout).astype(np.float32)*0.1
        ws['W'+out],ws['B'+out]=w,b
        nodes.append(h.make_node('Conv',[inp,'W'+out,'B'+out],[out],pads=[k//2]*4,group=g))
        return gref(x,w.astype(np.float64),b,[1,1],[1,1],[k//2]*2,[k//2]*2,g)
    def relu(inp,out,x):
        nodes.append(h.make_node('Relu',[inp],[out])); return np.maximum(x,0)
    x=rng.standard_normal(xs).astype(np.float32); c=xs[1]
    a=relu('a','ar',conv('x','a',c,wd,1,1,x.astype(np.float64)))
    b=relu('b','br',conv('ar','b',wd,wd,3,wd//gw,a))
    d=conv('br','d',wd,c,1,1,b)
    nodes.append(h.make_node('Add',['d','x'],['r'])); r=d+x
    nodes.append(h.make_node('Relu',['r'],['y'])); y=np.maximum(r,0).astype(np.float32)
    save(name,nodes,xs,x,[('y',y)],[nh.from_array(v,n) for n,v in ws.items()],13)
regnet_block('regnet_g24',[1,48,14,14],96,24)
regnet_block('regnet_g56',[1,64,16,16],112,56)
# Grouped convs of fewer output channels a group than a vector's lanes (ResNeXt's 4 and 8,
# RegNet's 8) between 1x1 convs, as in those models' blocks: their temporaries go NHWC and the
# grouped conv runs its output channels as lanes, several groups a vector, the input permuted
# in registers (passes/sched_group.c, backend/kernel.c window_load). 2, 4 and 8 channels a
# group, Cg != Mg, strided, odd maps, channels that leave a part vector, batch 2, and a
# squeeze-excite (RegNetY: global pool, 1x1 convs, Sigmoid, Mul) after the grouped conv.
def grp_block(name,xs,cm,g,s,se=False,cout=None):
    ws={}; nodes=[]
    def conv(inp,out,cin,cout,k,s,g,x,relu=True):
        w=rng.standard_normal([cout,cin//g,k,k]).astype(np.float32)/np.sqrt(cin//g*k*k); b=rng.standard_normal(cout).astype(np.float32)*0.1
        ws['W'+out],ws['B'+out]=w,b
        nodes.append(h.make_node('Conv',[inp,'W'+out,'B'+out],[out+'c' if relu else out],pads=[k//2]*4,strides=[s,s],group=g))
        y=gref(x,w.astype(np.float64),b,[s,s],[1,1],[k//2]*2,[k//2]*2,g)
        if relu: nodes.append(h.make_node('Relu',[out+'c'],[out])); y=np.maximum(y,0)
        return y
    x=rng.standard_normal(xs).astype(np.float32)
    cout=cout or cm
    a=conv('x','a',xs[1],cm,1,1,1,x.astype(np.float64))
    b=conv('a','b',cm,cout,3,s,g,a)
    if se:
        nodes.append(h.make_node('GlobalAveragePool',['b'],['q'])); q=b.mean(axis=(2,3),keepdims=True)
        q=conv('q','f1',cout,8,1,1,1,q)
        q=conv('f1','f2',8,cout,1,1,1,q,False); nodes.append(h.make_node('Sigmoid',['f2'],['f2s']))
        nodes.append(h.make_node('Mul',['b','f2s'],['bm'])); b=b*(1/(1+np.exp(-q)))
    y=conv('bm' if se else 'b','y',cout,24,1,1,1,b,False).astype(np.float32)
    save(name,nodes,xs,x,[('y',y)],[nh.from_array(v,n) for n,v in ws.items()],13)
grp_block('grp_blk_m8',[1,8,9,11],40,5,1)
grp_block('grp_blk_m8_se_b2',[2,8,7,10],48,6,1,True)
grp_block('grp_blk_m4_s2',[1,8,13,11],48,12,2)
grp_block('grp_blk_m2',[1,8,7,9],32,16,1)
grp_block('grp_blk_m4_c8',[1,8,8,13],64,8,1,False,32)
grp_block('grp_blk_m8_s2_7x7',[1,8,14,14],104,13,2)
# A classifier head (SqueezeNet's: a 1x1 conv to many channels + Relu + GlobalAveragePool):
# the conv's output is NHWC at -O2, its pixels coalesced into one loop, and its weights (600 KB,
# beyond half the L2) cut into chunks of output channels, the chunk loop outermost, the rest of
# the channels a nest of their own (passes/schedule.c, weight_chunks); batch 2 distributes the
# batch loop too.
def head(name,xs,m):
    w=(rng.standard_normal([m,xs[1],1,1])*0.05).astype(np.float32); b=rng.standard_normal(m).astype(np.float32)
    x=rng.standard_normal(xs).astype(np.float32)
    t=np.maximum(np.einsum('nchw,mc->nmhw',x.astype(np.float64),w[:,:,0,0].astype(np.float64))+b[None,:,None,None],0)
    y=t.mean(axis=(2,3),keepdims=True).astype(np.float32)
    nodes=[h.make_node('Conv',['x','W','B'],['c']),h.make_node('Relu',['c'],['r']),h.make_node('GlobalAveragePool',['r'],['y'])]
    save(name,nodes,xs,x,[('y',y)],[nh.from_array(w,'W'),nh.from_array(b,'B')],13)
head('head_chunks',[2,256,9,11],600)
# Dilated convs whose outer taps only ever read padding (DeepLabV3's ASPP: dilation 24 on a
# 7x7 map is a 1x1 conv): passes/dead_taps.c cuts those taps off at -O1 and above. A dim that
# keeps all its taps, one cut on one side only (asymmetric pads), a strided 1-D conv whose cut
# would change the output size (kept), and a 3-D one.
def dead(name,xs,ws,s,d,pads,relu):
    x=rng.standard_normal(xs).astype(np.float32); w=rng.standard_normal(ws).astype(np.float32); b=rng.standard_normal(ws[0]).astype(np.float32)
    nsp=len(xs)-2
    y=ref(x.astype(np.float64),w.astype(np.float64),b,s,d,pads[:nsp],pads[nsp:])
    if relu: y=np.maximum(y,0)
    nodes=[h.make_node('Conv',['x','W','B'],['c' if relu else 'y'],pads=pads,strides=s,dilations=d)]
    if relu: nodes.append(h.make_node('Relu',['c'],['y']))
    save(name,nodes,xs,x,[('y',y.astype(np.float32))],[nh.from_array(w,'W'),nh.from_array(b,'B')],13)
dead('dead_aspp24',[1,32,7,7],[16,32,3,3],[1,1],[24,24],[24,24,24,24],1)
dead('dead_aspp12',[1,16,14,14],[32,16,3,3],[1,1],[12,12],[12,12,12,12],0)
dead('dead_one_dim',[1,8,5,9],[8,8,3,3],[1,1],[6,2],[6,2,6,2],1)
dead('dead_asym',[2,8,6,6],[8,8,3,3],[1,1],[4,4],[8,0,0,8],0)
dead('dead_s3_1d',[1,8,5],[8,8,3],[3],[5],[5,5],0)
dead('dead_3d',[1,4,3,4,5],[8,4,3,3,3],[1,1,1],[3,1,5],[3,1,5,3,1,5],0)
# Taps that read the input for some outputs only (dilation 12 on a 14x14 map above, and these):
# the outputs in regions, each a conv of its own over an input slice, joined by Concats
# (passes/dead_taps.c, split): an odd map with a Relu, 3-D (27 regions); strided, where the
# regions would not pay and the conv stays whole.
dead('split_odd',[1,8,15,13],[16,8,3,3],[1,1],[12,12],[12,12,12,12],1)
dead('split_3d',[1,4,6,6,6],[8,4,3,3,3],[1,1,1],[5,5,5],[5,5,5,5,5,5],0)
dead('split_s2',[1,8,29,29],[16,8,3,3],[2,2],[12,12],[12,12,12,12],0)
# An ASPP (DeepLabV3's head) inside channel-last convs: a 1x1 branch and two dilated ones cut
# into tap pieces, whose Pad+Add joins (passes/schedule.c, region_mover) go NHWC with the
# Concat and the 1x1 projection after it.
def aspp(name,xs,c):
    x=rng.standard_normal(xs).astype(np.float32); x64=x.astype(np.float64)
    ws=[(rng.standard_normal(sh)/np.sqrt(np.prod(sh[1:]))).astype(np.float32) for sh in
        ([c,xs[1],3,3],[c,c,1,1],[c,c,3,3],[c,c,3,3],[c,3*c,1,1],[xs[1],c,3,3])]
    bs=[(0.1*rng.standard_normal(w.shape[0])).astype(np.float32) for w in ws]
    r=lambda i,t,dl,p: ref(t,ws[i].astype(np.float64),bs[i],[1,1],[dl,dl],[p,p],[p,p])
    t0=np.maximum(r(0,x64,1,1),0)
    cat=np.concatenate([np.maximum(r(1,t0,1,0),0),np.maximum(r(2,t0,12,12),0),np.maximum(r(3,t0,4,4),0)],1)
    y=r(5,np.maximum(r(4,cat,1,0),0),1,1)
    N=lambda *a,**k: h.make_node(*a,**k)
    nodes=[N('Conv',['x','W0','B0'],['a0'],pads=[1]*4),N('Relu',['a0'],['t0']),
           N('Conv',['t0','W1','B1'],['a1']),N('Relu',['a1'],['c1']),
           N('Conv',['t0','W2','B2'],['a2'],pads=[12]*4,dilations=[12,12]),N('Relu',['a2'],['c2']),
           N('Conv',['t0','W3','B3'],['a3'],pads=[4]*4,dilations=[4,4]),N('Relu',['a3'],['c3']),
           N('Concat',['c1','c2','c3'],['cat'],axis=1),N('Conv',['cat','W4','B4'],['a4']),N('Relu',['a4'],['t4']),
           N('Conv',['t4','W5','B5'],['y'],pads=[1]*4)]
    init=[nh.from_array(w,'W%d'%i) for i,w in enumerate(ws)]+[nh.from_array(b,'B%d'%i) for i,b in enumerate(bs)]
    save(name,nodes,xs,x,[('y',y.astype(np.float32))],init,13)
# A 1x1 conv on an input beyond the L2 (256 channels x 1200 pixels, 1.2 MB): its coalesced
# pixels cut in chunks whose input fits half the L2, the chunk loop outermost, the rest of the
# pixels (1200 = 2 x 512 + 176 on AVX-512) a nest of its own (passes/schedule.c, pixel_chunks);
# batch 2 distributes the batch loop too.
dead('chunks_1x1',[1,256,30,40],[64,256,1,1],[1,1],[1,1],[0,0,0,0],1)
dead('chunks_1x1_n2',[2,192,36,40],[40,192,1,1],[1,1],[1,1],[0,0,0,0],0)
# 1x1 convs of a long reduction on maps of no whole number of AVX-512 vectors (7x7, 15x9) and
# at least 8 vectors of output channels: channel-innermost (passes/schedule.c,
# channels_over_pixels), batch 2 and a Relu; 64 output channels stay coalesced.
dead('cm_1x1_7x7',[1,256,7,7],[144,256,1,1],[1,1],[1,1],[0,0,0,0],1)
dead('cm_1x1_n2',[2,320,15,9],[128,320,1,1],[1,1],[1,1],[0,0,0,0],0)
dead('cm_1x1_64',[1,288,5,7],[64,288,1,1],[1,1],[1,1],[0,0,0,0],1)
# Block weights past the L2 (2048 x 3 x 3 x two vectors of channels): a sum of convs over
# chunks of the input channels, a bias in the first and the Relu after the last
# (passes/split_channels.c); a 3-D one, strided.
dead('chunk_in_2048',[1,2048,6,5],[48,2048,3,3],[1,1],[1,1],[1,1,1,1],1)
dead('chunk_in_3d',[1,1024,3,4,3],[40,1024,2,3,3],[1,2,1],[1,1,1],[0,1,1,1,0,1],0)
# Concats of conv outputs between convs (a SqueezeNet fire module twice; an Inception-style
# block of three branches, one of them two convs deep): every map NHWC at -O2 on targets with
# vectors, the Concat's nests run channel-innermost (passes/schedule.c, concat_user,
# concat_order); before, a Concat kept every map it touched NCHW.
def concat_block(name, xs):
    ws = {}
    nodes = []
    x = rng.standard_normal(xs).astype(np.float32)
    def conv(inp, out, cin, cout, k, v):
        w = (rng.standard_normal([cout, cin, k, k]) / np.sqrt(cin * k * k)).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32) * 0.1
        ws['W' + out], ws['B' + out] = w, b
        nodes.append(h.make_node('Conv', [inp, 'W' + out, 'B' + out], [out + 'c'], pads=[k // 2] * 4))
        nodes.append(h.make_node('Relu', [out + 'c'], [out]))
        return np.maximum(ref(v, w.astype(np.float64), b, [1, 1], [1, 1], [k // 2] * 2, [k // 2] * 2), 0)
    C = xs[1]
    s1 = conv('x', 's1', C, 16, 1, x.astype(np.float64))
    a = conv('s1', 'a', 16, 32, 1, s1); b = conv('s1', 'b', 16, 32, 3, s1)
    nodes.append(h.make_node('Concat', ['a', 'b'], ['f1'], axis=1)); f1 = np.concatenate([a, b], 1)
    s2 = conv('f1', 's2', 64, 16, 1, f1)
    c = conv('s2', 'c', 16, 32, 1, s2); d0 = conv('s2', 'd0', 16, 16, 1, s2); d = conv('d0', 'd', 16, 48, 3, d0)
    e = conv('s2', 'e', 16, 16, 3, s2)
    nodes.append(h.make_node('Concat', ['c', 'd', 'e'], ['f2'], axis=1)); f2 = np.concatenate([c, d, e], 1)
    y = conv('f2', 'y', 96, 32, 1, f2)
    save(name, nodes, xs, x, [('y', y.astype(np.float32))], [nh.from_array(v, n) for n, v in ws.items()], 13)
concat_block('concat_nhwc', [1, 24, 13, 15])
concat_block('concat_nhwc_n2', [2, 8, 7, 9])
# Inception-style factorised 7x7 (a 1x7 then a 7x1 conv, 96 channels) next to a 1x1 branch,
# concatenated: the maps NHWC; the 1x7 conv's 17-wide rows cut in pieces of 6, two rows
# jammed (passes/schedule.c, conv_pixel_tile); batch 2.
def factor_block(name, xs, m):
    ws = {}
    nodes = []
    x = rng.standard_normal(xs).astype(np.float32)
    def conv(inp, out, cin, cout, kh, kw, v):
        w = (rng.standard_normal([cout, cin, kh, kw]) / np.sqrt(cin * kh * kw)).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32) * 0.1
        ws['W' + out], ws['B' + out] = w, b
        p = [kh // 2, kw // 2]
        nodes.append(h.make_node('Conv', [inp, 'W' + out, 'B' + out], [out + 'c'], pads=p + p))
        nodes.append(h.make_node('Relu', [out + 'c'], [out]))
        return np.maximum(ref(v, w.astype(np.float64), b, [1, 1], [1, 1], p, p), 0)
    s = conv('x', 's', xs[1], 32, 1, 1, x.astype(np.float64))
    a = conv('s', 'a', 32, m, 1, 7, s); b = conv('a', 'b', m, m, 7, 1, a)
    c = conv('s', 'c', 32, 16, 1, 1, s)
    nodes.append(h.make_node('Concat', ['b', 'c'], ['f'], axis=1)); f = np.concatenate([b, c], 1)
    y = conv('f', 'y', m + 16, 16, 1, 1, f)
    save(name, nodes, xs, x, [('y', y.astype(np.float32))], [nh.from_array(v, n) for n, v in ws.items()], 13)
factor_block('factor_17', [1, 24, 17, 17], 96)
factor_block('factor_8_n2', [2, 16, 8, 8], 144)
# The 7x1 conv's rows and columns one loop over the pixels, its input read at (h + kh) * W + w
# (passes/loops.c, loop_coalesce_shifted); 80 channels are no whole blocks of 2 vectors, left to
# block_list.
factor_block('factor_17_64', [1, 24, 17, 17], 64)
factor_block('factor_15_80_n2', [2, 16, 15, 15], 80)
# MaxViT's window partition after an MBConv block: a depthwise conv (its maps NHWC at -O2),
# an Add, then Reshape to [N, C, 1, H, 1, W], a Transpose of 6 dims to [N, 1, 1, H, W, C], a
# Reshape to [N, 1, HW, C] and a ReduceMean over C: the ReduceMean reads a 6-d map, which
# channel_last_layouts took for a 4-d one (a crash at -O2, passes/schedule.c).
def window_reduce(name):
    C, H, W = 32, 7, 7
    x = rng.standard_normal([1, C, H, W]).astype(np.float32)
    w = rng.standard_normal([C, 1, 3, 3]).astype(np.float32)
    d = ref(x.astype(np.float64), w.astype(np.float64).reshape(C, 1, 3, 3) * np.eye(C)[:, :, None, None], np.zeros(C), [1, 1], [1, 1], [1, 1], [1, 1])
    a = d + x
    t = a.reshape(1, C, 1, H, 1, W).transpose(0, 2, 4, 3, 5, 1).reshape(1, 1, H * W, C)
    y = t.mean(axis=-1, keepdims=True)
    c = lambda n, v: nh.from_array(np.array(v, np.int64), n)
    nodes = [h.make_node('Conv', ['x', 'W'], ['d'], group=C, pads=[1, 1, 1, 1]), h.make_node('Add', ['d', 'x'], ['a']),
             h.make_node('Reshape', ['a', 's6'], ['r6']), h.make_node('Transpose', ['r6'], ['t6'], perm=[0, 2, 4, 3, 5, 1]),
             h.make_node('Reshape', ['t6', 's4'], ['r4']), h.make_node('ReduceMean', ['r4'], ['y'], axes=[-1])]
    save(name, nodes, [1, C, H, W], x, [('y', y.astype(np.float32))],
         [nh.from_array(w, 'W'), c('s6', [1, C, 1, H, 1, W]), c('s4', [1, 1, H * W, C])], 13)
window_reduce('window_reduce_6d')
# RegNetY-800MF's block4: a 1x1 conv of 784 -> 784 channels on 7x7 (2.5 MB of weights)
# reading an NHWC map (after a depthwise conv) and writing NCHW for the grouped conv of 16
# channels a group after it: its weights cut in chunks of output channels that fit the L2
# though its output is not channel-last (passes/schedule.c, weight_chunks).
def chunks_nchw_out(name):
    C, H, W, G = 784, 7, 7, 49
    x = rng.standard_normal([1, C, H, W]).astype(np.float32)
    wd = rng.standard_normal([C, 1, 3, 3]).astype(np.float32)
    w1 = (rng.standard_normal([C, C, 1, 1]) / 28).astype(np.float32)
    wg = rng.standard_normal([C, C // G, 3, 3]).astype(np.float32)
    x64 = x.astype(np.float64)
    d = ref(x64, wd.astype(np.float64) * np.eye(C)[:, :, None, None], np.zeros(C), [1, 1], [1, 1], [1, 1], [1, 1])
    a = np.maximum(ref(d, w1.astype(np.float64), np.zeros(C), [1, 1], [1, 1], [0, 0], [0, 0]), 0)
    cg = C // G
    y = np.concatenate([ref(a[:, g * cg:(g + 1) * cg], wg[g * cg:(g + 1) * cg].astype(np.float64), np.zeros(cg), [1, 1], [1, 1], [1, 1], [1, 1])
                        for g in range(G)], axis=1)
    nodes = [h.make_node('Conv', ['x', 'Wd'], ['d'], group=C, pads=[1, 1, 1, 1]), h.make_node('Conv', ['d', 'W1'], ['c']),
             h.make_node('Relu', ['c'], ['a']), h.make_node('Conv', ['a', 'Wg'], ['y'], group=G, pads=[1, 1, 1, 1])]
    save(name, nodes, [1, C, H, W], x, [('y', y.astype(np.float32))],
         [nh.from_array(wd, 'Wd'), nh.from_array(w1, 'W1'), nh.from_array(wg, 'Wg')], 13)
chunks_nchw_out('chunks_nchw_out')
# InceptionV3's branch pool: a 3x3 conv, a zero Pad of the spatial dims (pads an input, opset
# 13), an AveragePool without pads, a 1x1 conv. passes/simplify.c folds the Pad into the pool
# (count_include_pad=1), so the temporaries can all go NHWC; asymmetric pads, and a Pad of
# another value, which stays a Pad.
def pad_pool(name, pads, value):
    C, M, H, W = 16, 32, 9, 11
    x = rng.standard_normal([1, C, H, W]).astype(np.float32)
    w = rng.standard_normal([M, C, 3, 3]).astype(np.float32); b = rng.standard_normal(M).astype(np.float32)
    w1 = rng.standard_normal([M, M, 1, 1]).astype(np.float32); b1 = rng.standard_normal(M).astype(np.float32)
    a = np.maximum(ref(x.astype(np.float64), w.astype(np.float64), b, [1, 1], [1, 1], [1, 1], [1, 1]), 0)
    ap = np.pad(a, [(pads[i], pads[i + 4]) for i in range(4)], constant_values=value)
    oh, ow = ap.shape[2] - 2, ap.shape[3] - 2
    p = sum(ap[:, :, i:i + oh, j:j + ow] for i in range(3) for j in range(3)) / 9
    y = ref(p, w1.astype(np.float64), b1, [1, 1], [1, 1], [0, 0], [0, 0])
    nodes = [h.make_node('Conv', ['x', 'W', 'B'], ['c'], pads=[1, 1, 1, 1]), h.make_node('Relu', ['c'], ['a']),
             h.make_node('Pad', ['a', 'pads', 'v'], ['ap']), h.make_node('AveragePool', ['ap'], ['p'], kernel_shape=[3, 3]),
             h.make_node('Conv', ['p', 'W1', 'B1'], ['y'])]
    init = [nh.from_array(w, 'W'), nh.from_array(b, 'B'), nh.from_array(w1, 'W1'), nh.from_array(b1, 'B1'),
            nh.from_array(np.array(pads, np.int64), 'pads'), nh.from_array(np.array(value, np.float32), 'v')]
    save(name, nodes, [1, C, H, W], x, [('y', y.astype(np.float32))], init, 13)
pad_pool('pad_avgpool', [0, 0, 1, 2, 0, 0, 2, 1], 0.0)
pad_pool('pad_avgpool_value', [0, 0, 1, 1, 0, 0, 1, 1], 0.5)
# Convs of several taps without padding on channel-last temporaries (InceptionV3's Conv2d_4a,
# Mixed_6a's stride-2 3x3): the input channels sunk below the taps (passes/schedule.c,
# sink_channels) as in the padded form; a 3x3 stride 2 and a 3x3 and 2x2 stride 1, none padded.
def unpadded_chain(name):
    C, H, W = 16, 16, 15
    x = rng.standard_normal([1, C, H, W]).astype(np.float32)
    shapes = [([32, C, 3, 3], [1, 1], [1, 1]), ([48, 32, 3, 3], [2, 2], [0, 0]), ([32, 48, 3, 3], [1, 1], [0, 0]),
              ([64, 32, 2, 2], [1, 1], [0, 0])]
    a, nodes, init, inp = x.astype(np.float64), [], [], 'x'
    for i, (ws, s, p) in enumerate(shapes):
        w = (rng.standard_normal(ws) / np.sqrt(ws[1] * ws[2] * ws[3])).astype(np.float32)
        b = rng.standard_normal(ws[0]).astype(np.float32)
        a = ref(a, w.astype(np.float64), b, s, [1, 1], p, p)
        last = i == len(shapes) - 1
        if not last: a = np.maximum(a, 0)
        nodes.append(h.make_node('Conv', [inp, 'W%d' % i, 'B%d' % i], ['y' if last else 'c%d' % i], pads=p + p, strides=s))
        if not last: nodes.append(h.make_node('Relu', ['c%d' % i], ['r%d' % i])); inp = 'r%d' % i
        init += [nh.from_array(w, 'W%d' % i), nh.from_array(b, 'B%d' % i)]
    save(name, nodes, [1, C, H, W], x, [('y', a.astype(np.float32))], init, 13)
unpadded_chain('unpadded_chain')
# DenseNet's dense layers after a stem conv: Concat -> BatchNormalization -> Relu -> 1x1 conv
# -> Relu -> 3x3 conv, twice, then a Concat and a GlobalAveragePool. fuse joins the BatchNorm
# (per channel constants read at the Concat's channel index) and Relu into the Concat; that
# kernel takes NHWC too (passes/schedule.c, concat_user), so the block goes channel-last.
def dense_block(name, xs, C, growth, layers):
    x = rng.standard_normal(xs).astype(np.float32)
    w0 = (rng.standard_normal([C, xs[1], 3, 3]) / np.sqrt(9 * xs[1])).astype(np.float32); b0 = rng.standard_normal(C).astype(np.float32)
    s0 = np.maximum(ref(x.astype(np.float64), w0.astype(np.float64), b0, [1, 1], [1, 1], [1, 1], [1, 1]), 0)
    feats, names = [s0], ['s0']
    nodes = [h.make_node('Conv', ['x', 'W0', 'B0'], ['c0'], pads=[1, 1, 1, 1]), h.make_node('Relu', ['c0'], ['s0'])]
    init = [nh.from_array(w0, 'W0'), nh.from_array(b0, 'B0')]
    for l in range(layers):
        cat = np.concatenate(feats, 1); cin = cat.shape[1]
        sc = rng.uniform(0.5, 1.5, cin).astype(np.float32); bi = rng.standard_normal(cin).astype(np.float32)
        mu = rng.standard_normal(cin).astype(np.float32); va = rng.uniform(0.5, 2, cin).astype(np.float32)
        bn = (cat - mu.reshape(1, -1, 1, 1)) / np.sqrt(va.reshape(1, -1, 1, 1) + 1e-5) * sc.reshape(1, -1, 1, 1) + bi.reshape(1, -1, 1, 1)
        a = np.maximum(bn, 0)
        w1 = (rng.standard_normal([4 * growth, cin, 1, 1]) / np.sqrt(cin)).astype(np.float32)
        b1 = np.zeros(4 * growth, np.float32)
        t = np.maximum(ref(a, w1.astype(np.float64), b1, [1, 1], [1, 1], [0, 0], [0, 0]), 0)
        w2 = (rng.standard_normal([growth, 4 * growth, 3, 3]) / np.sqrt(36 * growth)).astype(np.float32)
        b2 = np.zeros(growth, np.float32)
        y = ref(t, w2.astype(np.float64), b2, [1, 1], [1, 1], [1, 1], [1, 1])
        p = 'l%d_' % l
        nodes += [h.make_node('Concat', names, [p + 'cat'], axis=1),
                  h.make_node('BatchNormalization', [p + 'cat', p + 'sc', p + 'bi', p + 'mu', p + 'va'], [p + 'bn']),
                  h.make_node('Relu', [p + 'bn'], [p + 'a']), h.make_node('Conv', [p + 'a', p + 'W1', p + 'B1'], [p + 'c']),
                  h.make_node('Relu', [p + 'c'], [p + 't']),
                  h.make_node('Conv', [p + 't', p + 'W2', p + 'B2'], [p + 'y'], pads=[1, 1, 1, 1])]
        init += [nh.from_array(v, p + n) for v, n in [(sc, 'sc'), (bi, 'bi'), (mu, 'mu'), (va, 'va'), (w1, 'W1'), (b1, 'B1'), (w2, 'W2'), (b2, 'B2')]]
        feats.append(y); names.append(p + 'y')
    nodes += [h.make_node('Concat', names, ['f'], axis=1), h.make_node('GlobalAveragePool', ['f'], ['y'])]
    y = np.concatenate(feats, 1).mean(axis=(2, 3), keepdims=True)
    save(name, nodes, xs, x, [('y', y.astype(np.float32))], init, 13)
dense_block('dense_block', [1, 8, 9, 11], 32, 32, 2)
# Where the regions would read their taps' weights many times over (many input channels on a
# small map), a sum of 1x1 convs, one per live tap over the outputs it reads the input for,
# each padded to the map and added (passes/dead_taps.c, tap sums): ASPP's dilation 12 on
# 14x14 with a Relu, an odd map, strided, and 3-D.
dead('tapsum_aspp12',[1,192,14,14],[48,192,3,3],[1,1],[12,12],[12,12,12,12],1)
dead('tapsum_odd',[1,160,9,11],[40,160,3,3],[1,1],[7,8],[7,8,7,8],0)
dead('tapsum_s2',[1,128,27,27],[32,128,3,3],[2,2],[24,24],[24,24,24,24],0)
dead('tapsum_3d',[1,96,5,6,6],[16,96,3,3,3],[1,1,1],[4,5,5],[4,5,5,4,5,5],0)
# A grouped 3x3 conv of whole AVX-512 vectors a group (16 and 32 channels a group) between 1x1
# convs (RegNetY-800MF's, ResNeXt-50's layer3/4): group_split makes each group a dense conv,
# so it reads and writes NHWC and its neighbours go channel-last too (passes/schedule.c,
# channel_last_user).
def group_chain(name, C, G, H, W):
    x = rng.standard_normal([1, C, H, W]).astype(np.float32)
    wa = (rng.standard_normal([C, C, 1, 1]) / np.sqrt(C)).astype(np.float32); ba = rng.standard_normal(C).astype(np.float32)
    wg = (rng.standard_normal([C, C // G, 3, 3]) / np.sqrt(9 * C // G)).astype(np.float32); bg = rng.standard_normal(C).astype(np.float32)
    wc = (rng.standard_normal([C, C, 1, 1]) / np.sqrt(C)).astype(np.float32); bc = rng.standard_normal(C).astype(np.float32)
    a = np.maximum(ref(x.astype(np.float64), wa.astype(np.float64), ba, [1, 1], [1, 1], [0, 0], [0, 0]), 0)
    cg = C // G
    g = np.concatenate([ref(a[:, i * cg:(i + 1) * cg], wg[i * cg:(i + 1) * cg].astype(np.float64), bg[i * cg:(i + 1) * cg],
                            [1, 1], [1, 1], [1, 1], [1, 1]) for i in range(G)], 1)
    g = np.maximum(g, 0)
    y = ref(g, wc.astype(np.float64), bc, [1, 1], [1, 1], [0, 0], [0, 0]) + x
    nodes = [h.make_node('Conv', ['x', 'Wa', 'Ba'], ['ca']), h.make_node('Relu', ['ca'], ['a']),
             h.make_node('Conv', ['a', 'Wg', 'Bg'], ['cg'], group=G, pads=[1, 1, 1, 1]), h.make_node('Relu', ['cg'], ['g']),
             h.make_node('Conv', ['g', 'Wc', 'Bc'], ['cc']), h.make_node('Add', ['cc', 'x'], ['y'])]
    init = [nh.from_array(wa, 'Wa'), nh.from_array(ba, 'Ba'), nh.from_array(wg, 'Wg'), nh.from_array(bg, 'Bg'),
            nh.from_array(wc, 'Wc'), nh.from_array(bc, 'Bc')]
    save(name, nodes, [1, C, H, W], x, [('y', y.astype(np.float32))], init, 13)
group_chain('group16_chain', 64, 4, 9, 11)
group_chain('group32_chain', 128, 4, 7, 7)

# A 3-D conv whose output planes are a multiple of 4 KiB (2x32x32 floats), which keeps it
# along the width (passes/schedule.c conv_layout), reading another conv's output beyond half
# the L2 (64 channels, 592 KB padded): its channel tiles go inside the depth and the rows
# (rows_outside_tiles), as in R(2+1)D-18's 1x3x3 convs.
def planar_3d(name, xs, m1, m2):
    x=rng.standard_normal(xs).astype(np.float32)
    w1=(rng.standard_normal((m1,xs[1],3,1,1))/np.sqrt(3*xs[1])).astype(np.float32); b1=(rng.standard_normal(m1)*0.1).astype(np.float32)
    w2=(rng.standard_normal((m2,m1,1,3,3))/np.sqrt(9*m1)).astype(np.float32); b2=(rng.standard_normal(m2)*0.1).astype(np.float32)
    p,q=[0,1,1],[1,0,0]
    t=np.maximum(ref(x.astype(np.float64),w1.astype(np.float64),b1,[1,1,1],[1,1,1],q,q),0)
    y=np.maximum(ref(t,w2.astype(np.float64),b2,[1,1,1],[1,1,1],p,p),0).astype(np.float32)
    nodes=[h.make_node('Conv',['x','w1','b1'],['c1'],pads=q+q),h.make_node('Relu',['c1'],['r1']),
           h.make_node('Conv',['r1','w2','b2'],['c2'],pads=p+p),h.make_node('Relu',['c2'],['y'])]
    init=[nh.from_array(w1,'w1'),nh.from_array(b1,'b1'),nh.from_array(w2,'w2'),nh.from_array(b2,'b2')]
    save(name,nodes,xs,x,[('y',y)],init,13)
planar_3d('planar_3d_rows_inside',[1,16,2,32,32],64,144)
# A temporal 3x1x1 conv whose pixels are one coalesced loop inside its channel tiles, each
# tile's pass over them reading 1.8 MB (48 channels x 3 frames x 56x56): the pixels are cut in
# chunks of whole register tiles whose input fits in half the L2, outside the channel tiles,
# the last chunk shorter (pixel_tiles_outside), as in R(2+1)D-18's and S3D's temporal convs;
# 40 output channels, so that the last channel tile is a nest of its own too.
def temporal_chunks(name, xs, m):
    x=rng.standard_normal(xs).astype(np.float32)
    w=(rng.standard_normal((m,xs[1],3,1,1))/np.sqrt(3*xs[1])).astype(np.float32); b=(rng.standard_normal(m)*0.1).astype(np.float32)
    q=[1,0,0]
    y=np.maximum(ref(x.astype(np.float64),w.astype(np.float64),b,[1,1,1],[1,1,1],q,q),0).astype(np.float32)
    nodes=[h.make_node('Conv',['x','w','b'],['c'],pads=q+q),h.make_node('Relu',['c'],['y'])]
    save(name,nodes,xs,x,[('y',y)],[nh.from_array(w,'w'),nh.from_array(b,'b')],13)
temporal_chunks('planar_3d_pixel_chunks',[1,48,3,56,56],40)
# A 3x3 conv whose output channels are no multiple of conv_channel_block's block, left to
# block_list with its weights past half the L2, and a register tile's weights too (64 x 256
# x 9 floats, 590 KB): chunks of one tile of output channels (100 = 64 + 36; with AVX2's
# smaller tiles, chunks of 48) (passes/schedule.c, weight_chunks).
dead('chunks_one_tile',[1,256,8,8],[100,256,3,3],[1,1],[1,1],[1,1,1,1],1)
# Dilation 12 on 28x28 (DeepLabV3-ResNet50's ASPP): its tap sums cost 0.54 of the whole conv,
# more than half, less than the 5/8 at which passes/dead_taps.c splits it.
dead('split_28_d12',[1,256,28,28],[16,256,3,3],[1,1],[12,12],[12,12,12,12],1)
# (last: a case added before the others would change their random data)
aspp('aspp_nhwc',[1,32,28,28],64)
# Heads of few output channels with taps reading an NHWC map (passes/schedule.c few_taps: the
# input padded, the weights packed [M, kh, kw, C], each output a vector reduction over the
# channels): stride 2, dilation 2 with a 5x5 kernel and uneven pads, two groups, 12 outputs
# (fewer than an AVX-512 vector's lanes), batch 2; a 3x3 conv of C channels writes the map.
def few_head(name,xs,c,m,k,s,d,pads,group):
    x=rng.standard_normal(xs).astype(np.float32)
    w0=(rng.standard_normal([c,xs[1],3,3])/np.sqrt(9*xs[1])).astype(np.float32); b0=(rng.standard_normal(c)*0.1).astype(np.float32)
    w1=(rng.standard_normal([m,c//group,k,k])/np.sqrt(k*k*c/group)).astype(np.float32); b1=(rng.standard_normal(m)*0.1).astype(np.float32)
    t=np.maximum(ref(x.astype(np.float64),w0.astype(np.float64),b0,[1,1],[1,1],[1,1],[1,1]),0)
    cg,mg=c//group,m//group
    y=np.concatenate([ref(t[:,i*cg:(i+1)*cg],w1[i*mg:(i+1)*mg].astype(np.float64),b1[i*mg:(i+1)*mg],[s,s],[d,d],pads[:2],pads[2:])
                      for i in range(group)],1)
    nodes=[h.make_node('Conv',['x','w0','b0'],['c0'],pads=[1,1,1,1]),h.make_node('Relu',['c0'],['t']),
           h.make_node('Conv',['t','w1','b1'],['y'],pads=pads,strides=[s,s],dilations=[d,d],group=group)]
    init=[nh.from_array(w0,'w0'),nh.from_array(b0,'b0'),nh.from_array(w1,'w1'),nh.from_array(b1,'b1')]
    save(name,nodes,xs,x,[('y',y.astype(np.float32))],init,13)
few_head('few_head_s2',[1,3,17,21],32,3,3,2,1,[1,1,1,1],1)
few_head('few_head_d2_k5',[1,4,13,16],48,5,5,1,2,[4,3,4,3],1)
few_head('few_head_g2',[1,3,12,14],64,4,3,1,1,[1,1,1,1],2)
few_head('few_head_12',[2,3,9,19],32,12,3,1,1,[1,1,1,1],1)
# A stem of one input channel to 256 (a spectrogram's first conv, stride 2) whose 2 MB NHWC
# output dwarfs its input and weights: its rows outermost, each row's pixels written whole
# (passes/schedule.c, block_order_rows: `rows(...)` in the schedule line); a strided conv reads it.
def wide_stem(name,xs,c,m):
    x=rng.standard_normal(xs).astype(np.float32)
    w0=(rng.standard_normal([c,xs[1],3,3])/3).astype(np.float32); b0=(rng.standard_normal(c)*0.1).astype(np.float32)
    w1=(rng.standard_normal([m,c,3,3])/np.sqrt(9*c)).astype(np.float32); b1=(rng.standard_normal(m)*0.1).astype(np.float32)
    t=np.maximum(ref(x.astype(np.float64),w0.astype(np.float64),b0,[2,2],[1,1],[0,0],[0,0]),0)
    y=np.maximum(ref(t,w1.astype(np.float64),b1,[2,2],[1,1],[0,0],[0,0]),0)
    nodes=[h.make_node('Conv',['x','w0','b0'],['c0'],strides=[2,2]),h.make_node('Relu',['c0'],['t']),
           h.make_node('Conv',['t','w1','b1'],['c1'],strides=[2,2]),h.make_node('Relu',['c1'],['y'])]
    init=[nh.from_array(w0,'w0'),nh.from_array(b0,'b0'),nh.from_array(w1,'w1'),nh.from_array(b1,'b1')]
    save(name,nodes,xs,x,[('y',y.astype(np.float32))],init,13)
wide_stem('wide_stem_1to256',[1,1,100,80],256,32)
# Classifier heads conv -> MaxPool -> Flatten -> Gemm: the pool reads the conv's NHWC output and
# writes its small output NCHW for the Flatten (passes/schedule.c, narrowing_pool: channel vectors
# loaded whole, stored as scatters), so the conv before it writes NHWC. A 2x2 pool of 64
# channels (VGG's), and a 3x3 stride-2 one of 40 channels (2 vectors and a rest) on 13x13 (AlexNet's).
def pool_head(name,xs,c,m,k,s,n):
    x=rng.standard_normal(xs).astype(np.float32)
    w0=(rng.standard_normal([c,xs[1],3,3])/np.sqrt(9*xs[1])).astype(np.float32); b0=(rng.standard_normal(c)*0.1).astype(np.float32)
    w1=(rng.standard_normal([m,c,3,3])/np.sqrt(9*c)).astype(np.float32); b1=(rng.standard_normal(m)*0.1).astype(np.float32)
    t=np.maximum(ref(x.astype(np.float64),w0.astype(np.float64),b0,[1,1],[1,1],[1,1],[1,1]),0)
    u=np.maximum(ref(t,w1.astype(np.float64),b1,[1,1],[1,1],[1,1],[1,1]),0)
    oh,ow=(u.shape[2]-k)//s+1,(u.shape[3]-k)//s+1
    p=np.full((u.shape[0],m,oh,ow),-np.inf)
    for i in range(k):
        for j in range(k): p=np.maximum(p,u[:,:,i:i+(oh-1)*s+1:s,j:j+(ow-1)*s+1:s])
    f=p.reshape(p.shape[0],-1)
    g=(rng.standard_normal([f.shape[1],n])/np.sqrt(f.shape[1])).astype(np.float32); gb=(rng.standard_normal(n)*0.1).astype(np.float32)
    y=(f@g.astype(np.float64)+gb).astype(np.float32)
    nodes=[h.make_node('Conv',['x','w0','b0'],['c0'],pads=[1,1,1,1]),h.make_node('Relu',['c0'],['t']),
           h.make_node('Conv',['t','w1','b1'],['c1'],pads=[1,1,1,1]),h.make_node('Relu',['c1'],['u']),
           h.make_node('MaxPool',['u'],['p'],kernel_shape=[k,k],strides=[s,s]),h.make_node('Flatten',['p'],['f']),
           h.make_node('Gemm',['f','g','gb'],['y'])]
    init=[nh.from_array(w0,'w0'),nh.from_array(b0,'b0'),nh.from_array(w1,'w1'),nh.from_array(b1,'b1'),nh.from_array(g,'g'),nh.from_array(gb,'gb')]
    save(name,nodes,xs,x,[('y',y)],init,13)
pool_head('pool_head_2x2',[1,16,14,14],64,64,2,2,10)
pool_head('pool_head_3x3s2',[1,24,13,13],40,40,3,2,12)
# Winograd (passes/winograd.c): 3x3 stride-1 convs over many channels become an input transform,
# 36 or 16 1x1 convs and an output transform (F(4x4, 3x3) on these maps, but F(2x2, 3x3) for
# wino_valid's last conv, whose 12x11 map has 9 tiles of 4x4). A chain of them, NHWC in between (the
# transforms are channel_movers to the schedule): a residual Add and Relu fused into the output
# transform, a conv without bias and with asymmetric pads, odd heights and widths (the last tiles
# cut: one nest per region of tiles, the corner one in wino_odd_b2), batch 2, no padding at all.
def wino_chain(name,xs,c,pads):
    x=rng.standard_normal(xs).astype(np.float32)
    w0=(rng.standard_normal([c,xs[1],3,3])/np.sqrt(9*xs[1])).astype(np.float32); b0=(rng.standard_normal(c)*0.1).astype(np.float32)
    w1=(rng.standard_normal([c,c,3,3])/np.sqrt(9*c)).astype(np.float32); b1=(rng.standard_normal(c)*0.1).astype(np.float32)
    w2=(rng.standard_normal([c+16,c,3,3])/np.sqrt(9*c)).astype(np.float32)
    t=np.maximum(ref(x.astype(np.float64),w0.astype(np.float64),b0,[1,1],[1,1],[1,1],[1,1]),0)
    u=np.maximum(ref(t,w1.astype(np.float64),b1,[1,1],[1,1],[1,1],[1,1])+t,0)
    y=ref(u,w2.astype(np.float64),np.zeros(c+16),[1,1],[1,1],pads[:2],pads[2:])
    nodes=[h.make_node('Conv',['x','w0','b0'],['c0'],pads=[1,1,1,1]),h.make_node('Relu',['c0'],['t']),
           h.make_node('Conv',['t','w1','b1'],['c1'],pads=[1,1,1,1]),h.make_node('Add',['c1','t'],['a1']),
           h.make_node('Relu',['a1'],['u']),h.make_node('Conv',['u','w2'],['y'],pads=pads)]
    init=[nh.from_array(w0,'w0'),nh.from_array(b0,'b0'),nh.from_array(w1,'w1'),nh.from_array(b1,'b1'),nh.from_array(w2,'w2')]
    save(name,nodes,xs,x,[('y',y.astype(np.float32))],init,13)
wino_chain('wino_even',[1,16,24,22],128,[1,1,1,1])
wino_chain('wino_odd_b2',[2,16,15,11],160,[0,1,2,0])
wino_chain('wino_valid',[1,16,14,13],256,[0,0,0,0])
# A temporal 3x1x1 conv whose register tile's pass over the reduction reads 96 channels x 3
# frames of input lines per vector (74 KB for 4 AVX-512 vectors) out of an 884 KB input: one
# vector wide, 8 output channels tall (passes/schedule.c, input_streams); 20 output channels,
# so that a rest block of 4 follows the two whole ones.
temporal_chunks('temporal_streams',[1,96,4,24,24],20)
# Winograd in row bands (passes/winograd.c, bands), forced by --winograd-bands (the file
# `flags`, written below): the 64 -> 64 and 64 -> 80 convs in three bands of tile rows, every
# band a slice of the input rows with its halo, the bands' outputs concatenated; odd heights and
# widths (the last band's last tile row cut), asymmetric pads in the last conv.
wino_chain('wino_bands2',[1,16,67,70],64,[1,1,1,1])
wino_chain('wino_bands3',[1,16,96,90],64,[0,1,2,0])
# Winograd F(4x4, 3x3) (passes/winograd.c, the form of maps of 16 tiles of 4x4 or more): heights
# and widths of every rest modulo 4 (the last tiles cut: 13x15 rests 1 and 3, 18x22 rest 2, the
# last conv's 18x21 rest 1 with asymmetric pads), 32 and 48 channels (the fewest it takes),
# batch 2; wino2_small's 11x12 map has 9 tiles of 4x4, so its 64 -> 64 conv takes F(2x2, 3x3).
wino_chain('wino4_rest',[2,16,13,15],32,[1,1,1,1])
wino_chain('wino4_rest2',[1,16,18,22],48,[0,1,2,0])
wino_chain('wino2_small',[1,16,11,12],64,[1,1,1,1])
# Row bands of both forms, three of them forced by --winograd-bands (the file `flags`, which
# tests/check-models.sh adds to every run): the 40 -> 40 and 40 -> 56 convs' 36 products of 4x4
# tiles, the 64 -> 64 conv on an 11x12 map's 16 of 2x2 tiles; the last band's last tile row cut
# where the height is no multiple of the tile. (wino_bands2 and wino_bands3 above take F(4x4)
# and, with the flag, bands too; their maps are far below the size that bands them unforced.)
wino_chain('wino_bands4',[1,16,50,45],40,[0,1,2,0])
wino_chain('wino_bands2s',[1,16,11,12],64,[1,1,1,1])
for n in ['wino_bands2','wino_bands3','wino_bands4','wino_bands2s']:
    open(n+'/flags','w').write('--winograd-bands\n')
# A grouped 3x3 conv of 32 channels a group over 1024 channels (ResNeXt-101 32x8d's layer3):
# its channel-last input's pixels 4 KiB apart, so its padded copy has a vector more a pixel
# (passes/loops.c, loop_pad's skew), which no load reads.
group_chain('group32_skew', 1024, 32, 6, 7)
# A LayerNorm over the channels as ConvNeXt exports it (ReduceMean, Sub, Pow by a constant 2,
# ReduceMean, Add, Sqrt, Div) after a conv, and Pows by a constant int64 2, a per-channel 2,
# and a constant 3 and 0.5: the exponents of 2 lower to x * x (passes/ops/elementwise.c,
# pow_square), the others stay the general pow.
def pow_norm(name, xs, m):
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal([m, xs[1], 3, 3]) / np.sqrt(9 * xs[1])).astype(np.float32); b = rng.standard_normal(m).astype(np.float32)
    c = ref(x.astype(np.float64), w.astype(np.float64), b, [1, 1], [1, 1], [1, 1], [1, 1])
    d = c - c.mean(1, keepdims=True)
    n = d / np.sqrt((d ** 2).mean(1, keepdims=True) + 1e-6)
    p2 = n ** 2; p3 = np.abs(n) ** 3; ph = np.abs(n) ** 0.5
    nodes = [h.make_node('Conv', ['x', 'W', 'B'], ['c'], pads=[1, 1, 1, 1]),
             h.make_node('ReduceMean', ['c'], ['mu'], axes=[1]), h.make_node('Sub', ['c', 'mu'], ['d']),
             h.make_node('Pow', ['d', 'two'], ['d2']), h.make_node('ReduceMean', ['d2'], ['var'], axes=[1]),
             h.make_node('Add', ['var', 'eps'], ['ve']), h.make_node('Sqrt', ['ve'], ['sd']),
             h.make_node('Div', ['d', 'sd'], ['n']),
             h.make_node('Pow', ['n', 'two_i'], ['p2']), h.make_node('Pow', ['n', 'two_c'], ['p2c']),
             h.make_node('Abs', ['n'], ['a']), h.make_node('Pow', ['a', 'three'], ['p3']),
             h.make_node('Pow', ['a', 'half'], ['ph'])]
    init = [nh.from_array(w, 'W'), nh.from_array(b, 'B'), nh.from_array(np.array(2, np.float32), 'two'),
            nh.from_array(np.array(1e-6, np.float32), 'eps'), nh.from_array(np.array([2], np.int64), 'two_i'),
            nh.from_array(np.full([m, 1, 1], 2, np.float32), 'two_c'), nh.from_array(np.array(3, np.float32), 'three'),
            nh.from_array(np.array(0.5, np.float32), 'half')]
    f = lambda v: v.astype(np.float32)
    save(name, nodes, xs, x, [('n', f(n)), ('p2', f(p2)), ('p2c', f(p2)), ('p3', f(p3)), ('ph', f(ph))], init, 13)
pow_norm('pow_norm', [1, 16, 9, 10], 48)
# Winograd for grouped convs (passes/winograd.c: 48 channels a group or more; the products are
# grouped 1x1 convs): F(4x4) on 14x15 (the last tiles cut), F(2x2) on 11x12 with 3 groups,
# and three row bands of F(4x4) forced by --winograd-bands.
group_chain('wino_group48', 96, 2, 14, 15)
group_chain('wino_group48_f2', 144, 3, 11, 12)
group_chain('wino_group_bands', 96, 2, 21, 18)
open('wino_group_bands/flags','w').write('--winograd-bands\n')
# 1-D convs whose input is beyond half the L2 (passes/schedule.c, block_chunks): the pixels cut
# in chunks of whole register tiles, the chunk loop outside the blocks of output channels, the
# rest of the pixels a nest of its own; stride 2 (a wav2vec2-style feature encoder's), and
# stride 1 on a padded copy.
for name,xs,ws,s,d,pads,relu in [('chunks_1d_s2',[1,128,2501],[64,128,3],[2],[1],[0,0],1),
                                  ('chunks_1d_pad',[1,96,3000],[64,96,5],[1],[1],[2,2],0)]:
    os.makedirs(name+'/test_data_set_0',exist_ok=True)
    x=rng.standard_normal(xs).astype(np.float32); w=(rng.standard_normal(ws)/np.sqrt(ws[1]*ws[2])).astype(np.float32); b=rng.standard_normal(ws[0]).astype(np.float32)
    y=gref(x.astype(np.float64),w.astype(np.float64),b,s,d,pads[:1],pads[1:],1)
    if relu: y=np.maximum(y,0)
    nodes=[h.make_node('Conv',['x','W','B'],['c' if relu else 'y'],pads=pads,strides=s,dilations=d)]
    if relu: nodes.append(h.make_node('Relu',['c'],['y']))
    save(name,nodes,xs,x,[('y',y.astype(np.float32))],[nh.from_array(w,'W'),nh.from_array(b,'B')],13)
# GELU as PyTorch exports it (Div by sqrt 2, Erf, Add 1, Mul, Mul 0.5) after a conv whose
# outputs reach about -12 and 12, and 1 + erf of them as Add(1, Erf): the backend computes
# erf(y) + 1 in one (backend/math.c, m_erf1p: erfc(-y) below 0, 2 - erfc(y) above);
# --fp-strict keeps erf and the add.
def gelu_erf(name, xs, m):
    import math
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal([m, xs[1], 3, 3]) / np.sqrt(9 * xs[1]) * 3).astype(np.float32); b = rng.standard_normal(m).astype(np.float32)
    c = ref(x.astype(np.float64), w.astype(np.float64), b, [1, 1], [1, 1], [1, 1], [1, 1])
    verf = np.vectorize(math.erf)
    g = c * (verf(c / np.sqrt(2)) + 1) * 0.5
    nodes = [h.make_node('Conv', ['x', 'W', 'B'], ['c'], pads=[1, 1, 1, 1]),
             h.make_node('Div', ['c', 'r2'], ['d']), h.make_node('Erf', ['d'], ['e']), h.make_node('Add', ['e', 'one'], ['a']),
             h.make_node('Mul', ['c', 'a'], ['cm']), h.make_node('Mul', ['cm', 'half'], ['g']),
             h.make_node('Erf', ['c'], ['ec']), h.make_node('Add', ['one', 'ec'], ['e1'])]
    init = [nh.from_array(w, 'W'), nh.from_array(b, 'B'), nh.from_array(np.array(np.sqrt(2), np.float32), 'r2'),
            nh.from_array(np.array(1, np.float32), 'one'), nh.from_array(np.array(0.5, np.float32), 'half')]
    save(name, nodes, xs, x, [('g', g.astype(np.float32)), ('e1', (verf(c) + 1).astype(np.float32))], init, 13)
gelu_erf('gelu_erf', [1, 16, 9, 10], 48)
